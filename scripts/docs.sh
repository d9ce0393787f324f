#!/usr/bin/env bash
# The documentation site (mkdocs.yml, docs/), with the docs extra that scripts/install.sh
# installs into .venv:
#   scripts/docs.sh build    # check the generated pages, then build strictly into site/
#   scripts/docs.sh serve    # the same site on http://127.0.0.1:8000, rebuilt on each save
#   scripts/docs.sh write    # regenerate the generated pages (scripts/docs.py --write)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
export NO_MKDOCS_2_WARNING=1  # Material's notice about its successor, printed at each build
case "${1:-build}" in
    build)
        "$PY" scripts/docs.py --check
        "$PY" -m mkdocs build --strict --site-dir site "${@:2}"
        echo "docs: built into site/ (open site/index.html)"
        ;;
    serve)
        "$PY" scripts/docs.py --check
        exec "$PY" -m mkdocs serve --strict "${@:2}"
        ;;
    write)
        exec "$PY" scripts/docs.py --write
        ;;
    *)
        echo "usage: scripts/docs.sh build|serve|write [mkdocs options]" >&2
        exit 2
        ;;
esac
