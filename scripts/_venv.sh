# Sourced by the other scripts: makes .venv in the checkout and installs herald into it, at the
# releases constraints.txt pins, again whenever pyproject.toml or constraints.txt changes.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
python=""
for candidate in python3.13 python3.12 python3.11 python3; do
  if command -v "$candidate" >/dev/null 2>&1 &&
     "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    python="$candidate"; break
  fi
done
[ -n "$python" ] || { echo "herald needs Python 3.11 or newer" >&2; exit 1; }
stamp=".venv/.installed-$(cat pyproject.toml constraints.txt | sha256sum | cut -c1-16)-${HERALD_EXTRAS:-test}"
if [ ! -f "$stamp" ]; then
  [ -x .venv/bin/python ] || "$python" -m venv .venv
  # --no-compile: Python compiles each module as it is first imported, the few the suite uses,
  # rather than pip every module of every package installed.
  .venv/bin/python -m pip install --quiet --no-compile --upgrade pip -c constraints.txt
  .venv/bin/python -m pip install --quiet --no-compile -e ".[${HERALD_EXTRAS:-test}]" -c constraints.txt
  rm -f .venv/.installed-*
  touch "$stamp"
fi
