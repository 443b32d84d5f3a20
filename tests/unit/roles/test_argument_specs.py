"""Each role's argument spec is the one description of its variables (what `ansible-doc -t role` shows):
every public variable of defaults/main.yml is in it, and a default written there without Jinja is the
default the spec states. A spec whose `default:` drifted from the real one told users a wrong value."""

import pathlib

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[3]
ROLES = sorted(path.parent.parent.name for path in ROOT.glob("roles/*/meta/argument_specs.yml")
               if (path.parent.parent / "defaults" / "main.yml").exists())


def has_jinja(value):
    if isinstance(value, dict):
        return any(has_jinja(k) or has_jinja(v) for k, v in value.items())
    if isinstance(value, list):
        return any(has_jinja(v) for v in value)
    return isinstance(value, str) and ("{{" in value or "{%" in value)


def load(role):
    defaults = yaml.safe_load((ROOT / "roles" / role / "defaults" / "main.yml").read_text()) or {}
    specs = yaml.safe_load((ROOT / "roles" / role / "meta" / "argument_specs.yml").read_text())["argument_specs"]
    return defaults, specs


def test_every_role_with_defaults_is_checked():
    assert len(ROLES) >= 20, ROLES


@pytest.mark.parametrize("role", ROLES)
def test_spec_describes_every_public_default(role):
    defaults, specs = load(role)
    described = {name for spec in specs.values() for name in (spec.get("options") or {})}
    missing = sorted(name for name in defaults if not name.startswith("_") and name not in described)
    assert not missing, "roles/%s/defaults/main.yml sets %s, which no entry point of its argument spec describes" % (role, missing)


@pytest.mark.parametrize("role", ROLES)
def test_spec_defaults_are_the_real_defaults(role):
    defaults, specs = load(role)
    drifted = []
    for entry_point, spec in specs.items():
        for name, option in (spec.get("options") or {}).items():
            if name not in defaults or "default" not in option or has_jinja(defaults[name]):
                continue
            real, stated = defaults[name], option["default"]
            # a plain string default may be written with other YAML quoting in either file
            if real != stated and not (isinstance(stated, str) and not isinstance(real, (dict, list)) and str(real) == stated):
                drifted.append("%s.%s: defaults/main.yml %r, spec %r" % (entry_point, name, real, stated))
    assert not drifted, "roles/%s: the argument spec states another default than defaults/main.yml: %s" % (role, drifted)
