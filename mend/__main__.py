"""``python -m mend``: the same command line as ``mend`` (an environment without the console
script on PATH, such as a venv driven by its interpreter; helper-49)."""
from mend.cli import run

if __name__ == "__main__":
    run()
