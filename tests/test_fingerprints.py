"""Every built-in agent's numbers are the committed ones (bench/fingerprint.py, bench/results/fingerprints.json).

A change that moves any agent's numbers — the code's or the stack's (uv.lock) — fails here until the record is
rewritten (``python bench/fingerprint.py --record``) in a commit that says so. XLA's CPU code depends on the
host's vector extensions (a CPU without AVX-512 hashes differently), so records are per instruction set: on one
with no record the test skips, naming the CPU and the command that records it.
"""
import importlib.util
import os

import pytest

from agents import REGISTERED
from jaxrl import provenance

_spec = importlib.util.spec_from_file_location(
    "fingerprint", os.path.join(os.path.dirname(os.path.dirname(__file__)), "bench", "fingerprint.py"))
fingerprint = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fingerprint)


def committed_record() -> dict:
    environment = provenance.environment()
    records = fingerprint.load_records()
    assert records, f"no fingerprints committed in {fingerprint.RECORDS}: python bench/fingerprint.py --record"
    found = fingerprint.matching_record(records, environment)
    if found is not None:
        return found
    key = fingerprint.stack_key(environment)
    if not any(fingerprint.stack_key(r["environment"])["packages"] == key["packages"] for r in records):
        pytest.fail("the stack moved (uv.lock's versions differ from every committed fingerprint's): record the "
                    "new fingerprints with `python bench/fingerprint.py --record` in the commit that moves it")
    pytest.skip(f"no fingerprint committed for this CPU's instruction set ({environment['cpu']['model']}: "
                f"{' '.join(key['cpu_extensions'])}; XLA_FLAGS={key['xla_flags']!r}); XLA's CPU code differs by "
                "vector extensions, so the committed ones (" + "; ".join(
                    f"{r['environment']['cpu']['model']}: {' '.join(r['environment']['cpu']['extensions'])}"
                    for r in records) + ") do not apply: `python bench/fingerprint.py --record` adds this one")


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(REGISTERED))
def test_every_built_in_agents_numbers_are_the_committed_ones(name):
    record = committed_record()
    committed = record["agents"].get(name)
    if committed is None:  # its numbers moved by a deliberate change, and no one has recorded them on this CPU since
        cpu = record["environment"]["cpu"]["model"]
        pytest.skip(f"{name} has no fingerprint recorded for this CPU's instruction set ({cpu}) since its numbers last "
                    "moved (CHANGELOG.md): `python bench/fingerprint.py --record` on such a CPU records it")
    digest, returns = fingerprint.fingerprint(name)  # after the skip: a run costs up to a minute here
    assert digest == committed["hash"], (
        f"{name}'s numbers moved: fingerprint {digest} (last evaluation {returns}), committed {committed['hash']} "
        f"({committed['eval_returns']}) at {record['commit'][:10]} on {record['date']} under this stack and CPU "
        "instruction set; if the change is deliberate, `python bench/fingerprint.py --record` and say so in the "
        "commit")
