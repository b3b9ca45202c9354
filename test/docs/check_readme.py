"""The README's examples, run: docs that cannot go stale.

- ```python blocks with `>>>` lines run as a doctest (ELLIPSIS, NORMALIZE_WHITESPACE).
- Blocks whose first line is `$ build/upsim ...` run the command; the lines shown after it must
  appear in the output in order, consecutive except where a `...` line stands for lines left out
  (a block without a leading or trailing `...` is the output's start or end).
- Every other `build/upsim ...` line of a ```sh block is checked without running it: its command
  (and subject) exist, each --option it uses is in that command's --help, each configs/ or
  test/ path it names exists, and a `run` example's scenario with its --set overrides builds
  (`upsim run SCENARIO --dry-run --set ...`: keys and values are valid), or fails with exit 2
  where its comment says "exit 2". A run of a file an earlier step writes (a plan's best.yaml,
  `upsim init`'s scenario) or a placeholder (OTHER.yaml) is not dry-run.
- Each `--set KEY=VALUE` example of a command's --help (run, plan, shard, sweep) builds on a
  shipped DLRM or transformer scenario (a dry run).
Commands run in a scratch folder holding links to configs/, test/ and the build folder, so the
outputs they write never land in the checkout.

Usage: check_readme.py README.md BUILD_DIR (PYTHONPATH must reach the built package)."""

import doctest
import os
import re
import shlex
import subprocess
import sys
import tempfile


def blocks(text):
    """(language, first line number, lines) of each fenced block."""
    out = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        m = re.match(r"^```(\w*)\s*$", lines[i])
        if not m:
            i += 1
            continue
        start = i + 1
        j = start
        while j < len(lines) and not lines[j].startswith("```"):
            j += 1
        out.append((m.group(1), start + 1, lines[start:j]))
        i = j + 1
    return out


def without_comment(command):
    """The command up to an unquoted `#`."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars=False)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    return list(lexer)


def matches_shown(shown, actual):
    """Whether `shown` (lines, `...` = any lines) is in `actual` as the README promises."""
    segments = [[]]
    for line in shown:
        if line.strip() == "...":
            segments.append([])
        else:
            segments[-1].append(line.rstrip())
    open_start = not segments[0]
    open_end = not segments[-1]
    segments = [s for s in segments if s]
    actual = [a.rstrip() for a in actual]
    at = 0
    for k, seg in enumerate(segments):
        found = None
        first = k == 0 and not open_start
        for pos in ([0] if first else range(at, len(actual) - len(seg) + 1)):
            if actual[pos:pos + len(seg)] == seg:
                found = pos
                break
        if found is None:
            return f"not found in order: {seg[0]!r}"
        at = found + len(seg)
    if not open_end and at != len(actual):
        return f"output goes on after the last shown line: {actual[at]!r}"
    return None


def check_shown_runs(readme_blocks, sandbox, failures):
    runs = 0
    for language, line, body in readme_blocks:
        if not body or not body[0].startswith("$ build/upsim"):
            continue
        argv = without_comment(body[0][2:])
        runs += 1
        result = subprocess.run(argv, cwd=sandbox, capture_output=True, text=True, timeout=300)
        if result.returncode != 0:
            failures.append(f"README:{line}: `{body[0]}` exited {result.returncode}: "
                            f"{result.stderr.strip()[-400:]}")
            continue
        problem = matches_shown(body[1:], result.stdout.rstrip("\n").split("\n"))
        if problem:
            failures.append(f"README:{line}: `{body[0]}`: {problem}")
    return runs


def check_doctests(readme_blocks, sandbox, failures):
    examples = 0
    for language, line, body in readme_blocks:
        if language != "python" or not any(l.startswith(">>> ") for l in body):
            continue
        parser = doctest.DocTestParser()
        test = parser.get_doctest("\n".join(body) + "\n", {}, "README", "README.md", line - 1)
        examples += len(test.examples)
        runner = doctest.DocTestRunner(
            optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
        cwd = os.getcwd()
        os.chdir(sandbox)
        try:
            runner.run(test, out=lambda text: failures.append(f"README:{line}: doctest:\n{text}"))
        finally:
            os.chdir(cwd)
    return examples


def help_of(build, words, cache):
    key = tuple(words)
    if key not in cache:
        result = subprocess.run([os.path.join(build, "upsim"), *words, "--help"],
                                capture_output=True, text=True, timeout=60)
        cache[key] = (result.returncode, result.stdout)
    return cache[key]


SUBJECT_COMMANDS = {"validate", "calibrate", "convert"}


OPTIONS_WITH_VALUES = {"--out", "-o", "--trace", "--trace-ranks", "--trace-iterations", "--gpus",
                       "--top", "--jobs", "-j", "--max-simulations", "--refine", "--batch"}


def dry_run(words, expect_refusal, build, sandbox):
    """Why `upsim run SCENARIO --dry-run --set ...` of a run example does not do what the README
    says (build, or exit 2 when `expect_refusal`), or None; None too when the example names a
    file that does not exist (written by an earlier step, or a placeholder)."""
    scenario = None
    sets = []
    i = 2
    while i < len(words):
        word = words[i]
        if word in ("--set", "-s") and i + 1 < len(words):
            sets += ["--set", words[i + 1]]
            i += 2
            continue
        if word.startswith("--set="):
            sets += ["--set", word[len("--set="):]]
        elif word in OPTIONS_WITH_VALUES:
            i += 1
        elif not word.startswith("-") and scenario is None:
            scenario = word
        i += 1
    if scenario is None or not scenario.endswith(".yaml"):
        return None
    named = [scenario] + [a.split("=", 1)[1] for a in sets[1::2] if "=" in a]
    for path in named:
        if re.search(r"\.(yaml|csv|json)$", path) and not os.path.exists(
                os.path.join(sandbox, path)):
            return None
    result = subprocess.run([os.path.join(build, "upsim"), "run", scenario, "--dry-run", *sets],
                            cwd=sandbox, capture_output=True, text=True, timeout=120)
    if expect_refusal:
        if result.returncode != 2:
            return f"the README says exit 2; the dry run exited {result.returncode}"
        return None
    if result.returncode != 0:
        return f"its scenario and --set do not build: {result.stderr.strip()[-400:]}"
    return None


def check_commands(readme_blocks, build, source_root, sandbox, failures):
    cache = {}
    checked = 0
    for language, line, body in readme_blocks:
        if language not in ("sh", "bash", ""):
            continue
        joined = []
        for text in body:
            if joined and joined[-1].endswith("\\"):
                joined[-1] = joined[-1][:-1] + " " + text.strip()
            else:
                joined.append(text)
        for text in joined:
            text = text.strip()
            if text.startswith("$ "):
                text = text[2:]
            if not text.startswith("build/upsim "):
                continue
            # The first command of a pipeline or a list.
            words = without_comment(re.split(r"\s(?:&&|\||;)\s", text)[0])
            if len(words) < 2 or words[1].startswith("-"):
                continue
            command = words[1:3] if words[1] in SUBJECT_COMMANDS else words[1:2]
            checked += 1
            rc, help_text = help_of(build, command, cache)
            if rc != 0:
                failures.append(f"README:{line}: `{text}`: `upsim {' '.join(command)} --help` "
                                f"exited {rc}")
                continue
            if command[0] == "run":
                problem = dry_run(words, "exit 2" in text.split("#", 1)[-1] if "#" in text
                                  else False, build, sandbox)
                if problem:
                    failures.append(f"README:{line}: `{text}`: {problem}")
            for word in words[1 + len(command):]:
                option = word.split("=")[0]
                if option.startswith("--") and option not in help_text:
                    failures.append(f"README:{line}: `{text}`: {option} is not an option of "
                                    f"`upsim {' '.join(command)}`")
                if re.match(r"^(configs|test)/\S+\.(yaml|csv)$", word) and not os.path.exists(
                        os.path.join(source_root, word)):
                    failures.append(f"README:{line}: `{text}`: {word} does not exist")
    return checked


HELP_SCENARIOS = ("configs/dlrm_4gpu.yaml", "configs/gpt2_4gpu.yaml")


def check_help_examples(build, sandbox, failures):
    """The --set examples of the commands' --help texts, each dry-run on a shipped scenario."""
    checked = 0
    for command in ("run", "plan", "shard", "sweep"):
        result = subprocess.run([os.path.join(build, "upsim"), command, "--help"],
                                capture_output=True, text=True, timeout=60)
        text = re.sub(r"\s+", " ", result.stdout)
        for example in re.findall(r"--set ([\w.\[\]]+=[^\s,;)]+)", text):
            if "<" in example:
                continue  # a placeholder (<path>)
            checked += 1
            ok = False
            for scenario in HELP_SCENARIOS:
                run = subprocess.run([os.path.join(build, "upsim"), "run", scenario, "--dry-run",
                                      "--set", example], cwd=sandbox, capture_output=True,
                                     text=True, timeout=120)
                ok = ok or run.returncode == 0
            if not ok:
                failures.append(f"`upsim {command} --help`: its example --set {example} builds "
                                f"on none of {', '.join(HELP_SCENARIOS)}")
    return checked


def main():
    readme, build = sys.argv[1], os.path.abspath(sys.argv[2])
    source_root = os.path.dirname(os.path.abspath(readme))
    with open(readme, encoding="utf-8") as f:
        readme_blocks = blocks(f.read())
    failures = []
    with tempfile.TemporaryDirectory(prefix="upsim-readme-") as sandbox:
        for name in ("configs", "test"):
            os.symlink(os.path.join(source_root, name), os.path.join(sandbox, name))
        os.symlink(build, os.path.join(sandbox, "build"))
        runs = check_shown_runs(readme_blocks, sandbox, failures)
        examples = check_doctests(readme_blocks, sandbox, failures)
        commands = check_commands(readme_blocks, build, source_root, sandbox, failures)
        help_examples = check_help_examples(build, sandbox, failures)
    for failure in failures:
        print(failure, file=sys.stderr)
    print(f"README: {runs} examples run and their shown output compared, {examples} doctest "
          f"examples, {commands} other commands checked (command, options, files), "
          f"{help_examples} --help examples: "
          f"{len(failures)} problem(s)")
    if runs == 0 or examples == 0 or commands == 0 or help_examples == 0:
        print("README: an example kind was not found; the checker no longer reads the README",
              file=sys.stderr)
        return 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
