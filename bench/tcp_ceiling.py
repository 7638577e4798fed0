# Bidirectional TCP throughput between two hosts, nothing else on the CPUs'
# plate: each side sends and receives at once for SECONDS, then prints the
# GB/s it received. With "copy", each side also copies every byte once more
# (into its send buffer before sending, out of its receive buffer into a
# 60 MiB region after), about what a FIFO slot adds; a collective reduces on
# top of that. Used by bench/tcp_ceiling.sh.
#
#   tcp_ceiling.py server|client ADDR SECONDS [copy]
import socket
import sys
import threading
import time

role, addr, secs = sys.argv[1], sys.argv[2], float(sys.argv[3])
copy = len(sys.argv) > 4 and sys.argv[4] == "copy"
if role == "server":
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((addr, 29900))
    ls.listen(1)
    s, _ = ls.accept()
else:
    for _ in range(100):
        try:
            s = socket.create_connection((addr, 29900))
            break
        except OSError:
            time.sleep(0.05)
chunk = 4 << 20
src, sendbuf = bytearray(chunk), bytearray(chunk)
stop = time.time() + secs


def send():
    while time.time() < stop:
        if copy:
            sendbuf[:] = src
        s.sendall(sendbuf)
    s.shutdown(socket.SHUT_WR)


sender = threading.Thread(target=send)
sender.start()
rb = memoryview(bytearray(chunk))
region = memoryview(bytearray(64 << 20))
n, t0 = 0, time.time()
while True:
    k = s.recv_into(rb)
    if k == 0:
        break
    if copy:
        o = n % (60 << 20)
        region[o:o + k] = rb[:k]
    n += k
dt = time.time() - t0
sender.join()
sys.stdout.write(f"{role}: received {n / dt / 1e9:.3f} GB/s\n")
sys.stdout.flush()
