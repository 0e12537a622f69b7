include tests/unit/native.mk

unit: unit-native
asan:
