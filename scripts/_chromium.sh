# Sourced by the scripts whose tests drive a browser (the console's): Debian's chromium,
# installed when missing. Playwright drives it as it is; its own browsers are never downloaded.
if ! command -v chromium >/dev/null 2>&1; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq chromium >/dev/null
fi
