unit:
asan:
