"""The README's "## Example" runs as written and prints what the README shows.

The section's code blocks are taken from README.md itself: ``model.py`` is written into a
temporary folder, and the usage block runs there in a fresh interpreter (with a private, empty
coarsen cache), followed by a few checks of the prose (the gradient against central
differences, ``dw``'s shape and dtype, the fine-grained baseline's tape).  Its output must hold
the README's report block line for line (the timing line's number aside) and the README's
excerpt of the generated gradient as consecutive lines, so the README cannot go stale silently.
"""
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
README = os.path.join(ROOT, "README.md")

TIMING = re.compile(r"  symbolic \+ code generation time: \d+\.\d{3} s")

# appended to the README's usage block: checks of what the prose around it says
CHECKS = '''
# ---- appended by tests/project/test_readme.py
assert dw.shape == w.shape and dw.dtype == w.dtype
h = 1e-6
for j in range(w.shape[0]):
    e = np.zeros_like(w)
    e[j] = h
    fd = (loss(w + e, 0.1, X, y) - loss(w - e, 0.1, X, y)) / (2 * h)
    assert abs(fd - dw[j]) <= 1e-7 * max(1.0, abs(fd)), (j, fd, dw[j])
fd = (loss(w, 0.1 + h, X, y) - loss(w, 0.1 - h, X, y)) / (2 * h)
assert abs(fd - db) <= 1e-7 * max(1.0, abs(fd)), (fd, db)
assert value == loss(w, 0.1, X, y)
fine = coarsen.differentiate(loss, wrt=("w", "b"), coarsen=False, target="python")
fine(w, 0.1, X, y)
print(f"@@ samples {X.shape[0]} tape {g.tape_bytes} fine {fine.tape_bytes}")
'''


def example_section(text):
    return text.split("\n## Example\n", 1)[1].split("\n## ", 1)[0]


def example_blocks(text):
    """(model.py, usage, report, excerpt): the section's four code blocks, by their content."""
    blocks = re.findall(r"^```(\w*)\n(.*?)^```$", example_section(text), re.MULTILINE | re.DOTALL)
    model = [b for lang, b in blocks if lang == "python" and b.startswith("# model.py\n")]
    usage = [b for lang, b in blocks if lang == "python" and "coarsen.differentiate(loss" in b]
    report = [b for lang, b in blocks if lang == "" and b.startswith("coarsen plan for ")]
    excerpt = [b for lang, b in blocks if lang == "python" and b.lstrip().startswith("# segment")]
    assert len(model) == len(usage) == len(report) == len(excerpt) == 1, \
        "README's Example should have one model.py, usage, report and excerpt block"
    return model[0], usage[0], report[0], excerpt[0]


def _consecutive(lines, want):
    """Whether ``want`` occurs in ``lines`` as a run of consecutive lines (regexes match fully)."""
    def same(a, b):
        return b.fullmatch(a) is not None if isinstance(b, re.Pattern) else a == b
    return any(all(same(lines[i + k], w) for k, w in enumerate(want))
               for i in range(len(lines) - len(want) + 1))


def stale_parts(text, out):
    """What in the README's Example ``out`` (the example's output) contradicts: a list of
    messages, empty when the README is up to date."""
    _, _, report, excerpt = example_blocks(text)
    lines = out.splitlines()
    problems = []
    want = [TIMING if TIMING.fullmatch(line) else line for line in report.splitlines()]
    if sum(isinstance(w, re.Pattern) for w in want) != 1:
        problems.append("the report block has no timing line of the printed form")
    if not _consecutive(lines, want):
        problems.append("the printed report differs from the README's report block:\n" + report)
    if not _consecutive(lines, excerpt.splitlines()):
        problems.append("the README's excerpt is not in what print(g.source) prints:\n" + excerpt)
    m = re.search(r"^@@ samples (\d+) tape (\d+) fine (\d+)$", out, re.MULTILINE)
    if m is None:
        return problems + ["the checks after the usage block did not finish"]
    samples, tape, fine = map(int, m.groups())
    prose = " ".join(example_section(text).split())
    for pattern, value in ((r"on these (\d+) samples", samples),
                           (r"tape of the last call: (\d+) bytes", tape),
                           (r"tapes (\d+) bytes for the same call", fine)):
        found = re.search(pattern, prose)
        if found is None or int(found.group(1)) != value:
            problems.append(f"README: {pattern!r} should read {value}, "
                            f"found {found.group(0) if found else 'nothing'}")
    return problems


@pytest.fixture(scope="module")
def readme_run(tmp_path_factory):
    with open(README, encoding="utf-8") as fh:
        text = fh.read()
    model, usage, _, _ = example_blocks(text)
    work = tmp_path_factory.mktemp("readme_example")
    (work / "model.py").write_text(model, encoding="utf-8")
    (work / "example.py").write_text(usage + CHECKS, encoding="utf-8")
    env = dict(os.environ, COARSEN_CACHE_DIR=str(work / "cache"),
               PYTHONPATH=os.pathsep.join([str(work), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "example.py"], cwd=work, env=env,
                          capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return text, proc.stdout


def test_readme_example_runs_and_prints_what_the_readme_shows(readme_run):
    text, out = readme_run
    problems = stale_parts(text, out)
    assert not problems, "README.md's Example is stale:\n" + "\n".join(problems) + \
        "\n--- the example printed:\n" + out


def test_a_stale_readme_is_caught(readme_run):
    text, out = readme_run
    _, _, report, excerpt = example_blocks(text)
    # one changed report line, one changed excerpt line, one changed byte count in the prose
    line = report.splitlines()[1]
    stale = text.replace(line, line.replace(" coarse", " coarse ", 1))
    assert len(stale_parts(stale, out)) == 1
    line = excerpt.splitlines()[-1]
    assert len(stale_parts(text.replace(line, line.replace("+=", "-=")), out)) == 1
    m = re.search(r"tapes (\d+) bytes for", text)
    assert len(stale_parts(text.replace(m.group(0), "tapes 1 bytes for"), out)) == 1
    assert len(stale_parts(text.replace("last call: 0 bytes", "last call: 8 bytes"), out)) == 2  # block, prose
