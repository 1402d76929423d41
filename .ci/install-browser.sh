#!/usr/bin/env bash
# Install Debian's Chromium and ChromeDriver for the browser tests (tests/browser/), if missing.
#
#   bash .ci/install-browser.sh          # no-op when /usr/bin/chromium already exists
#
# Never downloads a browser of its own (no `playwright install`): Playwright for Python is
# pointed at /usr/bin/chromium by tests/browser/conftest.py. Non-interactive; works as root, or
# through sudo (without a password prompt) when not root. Exits non-zero if it cannot install.
set -euo pipefail

CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
if [ -x "$CHROMIUM" ] && [ -x /usr/bin/chromedriver ]; then
    echo "install-browser: $("$CHROMIUM" --version 2>/dev/null || echo "$CHROMIUM") already installed"
    exit 0
fi

if [ "$(id -u)" -eq 0 ]; then
    SUDO=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    SUDO=(sudo -n)
else
    echo "install-browser: need root or password-less sudo to apt-get install chromium chromium-driver" >&2
    exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "install-browser: apt-get not found (this script is for Debian/Ubuntu); install Chromium so that $CHROMIUM exists" >&2
    exit 1
fi

export DEBIAN_FRONTEND=noninteractive
APT_OPTS=(-y -q -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold)
for attempt in 1 2 3; do
    # apt may be locked by another apt process for a moment: retry a few times.
    if "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q \
        && "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install "${APT_OPTS[@]}" --no-install-recommends chromium chromium-driver; then
        break
    fi
    if [ "$attempt" -eq 3 ]; then
        echo "install-browser: apt-get install chromium chromium-driver failed" >&2
        exit 1
    fi
    echo "install-browser: apt-get failed (attempt $attempt), retrying in 10 s" >&2
    sleep 10
done

"$CHROMIUM" --version
/usr/bin/chromedriver --version || true
