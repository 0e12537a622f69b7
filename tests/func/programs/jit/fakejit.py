# Drives fakejit.c: registers an image, unregisters it, registers two more
# (one of them twice the same bytes), keeping the CPU busy in between so
# the profile has samples. argv: the library, the image file.
import ctypes
import sys
import time


def busy(seconds):
    t0 = time.process_time()
    while time.process_time() - t0 < seconds:
        sum(i * i for i in range(1000))


lib = ctypes.CDLL(sys.argv[1])
lib.fake_register.restype = ctypes.c_void_p
lib.fake_register.argtypes = [ctypes.c_char_p, ctypes.c_uint64]
lib.fake_unregister.argtypes = [ctypes.c_void_p]
data = open(sys.argv[2], "rb").read()
img = ctypes.create_string_buffer(data, len(data))
busy(0.2)
a = lib.fake_register(img, len(data))
busy(0.3)
lib.fake_unregister(a)
busy(0.3)
b = lib.fake_register(img, len(data))
c = lib.fake_register(img, len(data))
busy(0.3)
print("done")
