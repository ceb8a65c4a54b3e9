# Starts a child that leaves the process group (setsid) and would live for an hour, marks that
# it did, then hangs in solution() so that the check must be ended from outside.
import os
import subprocess
import sys
import time
import tempfile

marker = os.path.join(tempfile.gettempdir(), f"escaped-{os.environ.get('RANK', '0')}")
subprocess.Popen([sys.executable, "-c", f"import time; open({marker!r}, 'w').close(); time.sleep(3600)"],
                 start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def solution(x):
    time.sleep(3600)
