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
  .venv/bin/python -m pip install --quiet --upgrade pip -c constraints.txt
  .venv/bin/python -m pip install --quiet -e ".[${HERALD_EXTRAS:-test}]" -c constraints.txt
  rm -f .venv/.installed-*
  touch "$stamp"
fi
