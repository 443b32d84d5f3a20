#!/usr/bin/env bash
# ansible-test sanity needs the collection at .../ansible_collections/trainfleet/training:
# copy the tracked tree there (a temp dir, never the repo) and run it with the venv's Python.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
REPORTS=$ROOT/out/test-reports
mkdir -p "$REPORTS"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
dest=$work/ansible_collections/trainfleet/training
mkdir -p "$dest"
git ls-files -co --exclude-standard -z | grep -zvE '^\.(collections|ansible)/' | rsync -a --from0 --files-from=- ./ "$dest/"
# Collections our plugins import (amazon.aws, kubernetes.core, ...) come from the venv's ansible package.
site=$(python -c 'import ansible_collections; print(list(ansible_collections.__path__)[0])')
for ns in amazon community kubernetes ansible; do
  [ -d "$site/$ns" ] && ln -s "$site/$ns" "$work/ansible_collections/$ns"
done
cd "$dest"
git init -q && git add -A && git -c user.name=ci -c user.email=ci@invalid commit -qm snapshot
# ansible-test bootstraps pip in its sanity venvs with a script from a host we cannot reach:
# give it our stand-in (scripts/get_pip_bootstrap.py) under the cache name it looks for.
pip_version=$(python -c 'from ansible_test._internal.python_requirements import get_venv_packages as g; from types import SimpleNamespace as N; print(g(N(version="3.11"))["pip"])')
mkdir -p "$HOME/.ansible/test/cache"
cp "$ROOT/scripts/get_pip_bootstrap.py" "$HOME/.ansible/test/cache/get_pip_${pip_version//./_}.py"
# --requirements installs the sanity tools (pylint, yamllint, voluptuous, ...) into the venv once.
set +e
ansible-test sanity --color no --python 3.11 --requirements --junit "$@" 2>&1 | tee "$work/sanity.log"
rc=${PIPESTATUS[0]}
set -e
python "$ROOT/scripts/sanity_junit.py" "$work/sanity.log" tests/output/junit "$REPORTS/sanity.xml"
exit "$rc"
