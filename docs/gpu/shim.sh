# Sourced (from the project root) by the GPU scripts: portable from the working tree without installing.
# portable/ is copied to /tmp/shim with the three code folders linked in (the package layout of
# pyproject's package-dir), and /tmp/shim/bin/portable runs its CLI. The checkout's own portable/
# (without runners/) must not shadow the shim: never run Python with the repository root first on
# sys.path (python3 -c, python3 -m from the root).
mkdir -p /tmp/shim/bin
rm -rf /tmp/shim/portable && cp -r portable /tmp/shim/
for d in runners exporters validators; do ln -s "$PWD/$d" "/tmp/shim/portable/$d"; done
printf '#!/usr/bin/env python3\nimport sys\nsys.path.insert(0, "/tmp/shim")\nfrom portable.cli import main\nmain()\n' \
  >/tmp/shim/bin/portable
chmod +x /tmp/shim/bin/portable
export PATH=/tmp/shim/bin:$PATH PYTHONPATH=/tmp/shim PYTHONUNBUFFERED=1
