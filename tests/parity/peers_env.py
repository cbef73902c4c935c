"""For the parity scripts that need the peers' virtual environment (bench/peers/setup.sh):
when the interpreter running a script lacks what it imports, the script runs itself again under
the peers' interpreter, or reports itself skipped (exit 77, which CTest reads as skipped)."""
import os
import sys


def peers_python():
    """$QKV_PEERS_PYTHON, else $QKV_PEERS_VENV/bin/python, else build/peers-venv/bin/python, if it
    exists and is not the running interpreter."""
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    venv = os.environ.get("QKV_PEERS_VENV") or os.path.join(root, "build", "peers-venv")
    for p in (os.environ.get("QKV_PEERS_PYTHON"), os.path.join(venv, "bin", "python")):
        if p and os.path.exists(p) and os.path.realpath(p) != os.path.realpath(sys.executable):
            return p
    return None


def rerun_in_peers_env(needs):
    """Runs the script again under peers_python() (once), or prints why it is skipped and exits 77."""
    other = peers_python()
    if other and not os.environ.get("QKV_PARITY_REEXEC"):
        os.environ["QKV_PARITY_REEXEC"] = "1"
        os.execv(other, [other] + sys.argv)
    print(f"parity: skipped (needs {needs}: bash bench/peers/setup.sh, or set QKV_PEERS_PYTHON)")
    sys.exit(77)
