"""Proving "no network" with this machine only: a server on every address of this machine, a
probe that tries each of them and lists the interfaces it sees. Nothing beyond the machine is
ever addressed."""

import subprocess

# argv: HOST:PORT ...; prints the interfaces it sees, then CONNECTED or failed per address
PROBE = (
    "import socket, sys\n"
    "dev = [ln.split(':')[0].strip() for ln in open('/proc/net/dev').read().splitlines()[2:]]\n"
    "print('interfaces', sorted(dev), sorted(n for _, n in socket.if_nameindex()))\n"
    "for addr in sys.argv[1:]:\n"
    "    host, port = addr.rsplit(':', 1)\n"
    "    try:\n"
    "        socket.create_connection((host, int(port)), timeout=3); print('CONNECTED', addr)\n"
    "    except OSError as e:\n"
    "        print('failed', addr, e.errno)\n"
)


def host_addresses() -> list[str]:
    """This machine's own IPv4 addresses (loopback first), from its interfaces."""
    out = subprocess.run(["ip", "-o", "-4", "addr", "show"], capture_output=True, text=True)
    addrs = [line.split()[3].split("/")[0] for line in out.stdout.splitlines()] if out.returncode == 0 else []
    return ["127.0.0.1"] + [a for a in addrs if a != "127.0.0.1"]
