"""``python -m bringup.explain`` on the recorded failure corpus (tests/fixtures/failures/,
each log made by tests/fixtures/failures/record_failures.py running the failing configuration on
a sandbox node), through the real CLI. The driver layer's failures cannot be made here (no
node has the hardware): their samples, public-*.log, quote public reports, cited in each
header.

Every recorded log must name exactly its causes (a log of one failure matching another
signature fails here), every signature and every pattern of it must be met by some
recorded log (no signature from memory), and a header alone explains nothing.
"""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from bringup import explain

ROOT = Path(__file__).resolve().parents[2]
FAILURES = ROOT / "tests" / "fixtures" / "failures"

# recorded log -> (the signatures it shows, in the table's order; a text of its key line)
EXPECTED = {
    "flashinfer-0.7.0-trap": (["flashinfer-arch-needs-newer-cuda", "flashinfer-empty-arch-set"],
                              "SM 12.x requires CUDA >= 12.9"),
    "flashinfer-0.7.2-gb10-trap": (["flashinfer-arch-needs-newer-cuda", "flashinfer-empty-arch-set"],
                                   "RuntimeError: FlashInfer requires GPUs with sm75"),
    "ptxas-12.8-sm120f": (["ptxas-unknown-arch"], "ptxas fatal"),
    "flashinfer-norm-no-cublas-headers": (["cublas-headers-missing"], "cublasLt.h"),
    "flashinfer-sampling-no-curand-headers": (["curand-headers-missing"], "curand.h"),
    "flashinfer-cuda-home-missing": (["nvcc-not-found"], "/bin/sh: 1:"),
    "flashinfer-no-nvcc": (["nvcc-not-found"], "Could not find nvcc"),
    "flashinfer-link-no-libcuda": (["libcuda-not-found"], "cannot find -lcuda"),
    "nvcc-13.0-headers-12.8": (["cuda-headers-other-release"], "__cudaLaunch"),
    "flashinfer-cudart-12-in-cuda-13": (["cudart-other-release"], "libcudart.so.12"),
    "sglang-jit-nvcc-wrapper": (["cudart-not-found"], "cannot find -lcudart"),
    "sglang-jit-cuda-home-missing": (["nvcc-not-found"], "/bin/sh: 1:"),
    "service-start-no-gpu": (["no-accelerator"], "No accelerator"),
    # Quoted from public reports (each header cites its source).
    "public-open-module-required": (["open-module-required", "rm-init-adapter-failed"],
                                    "requires use of the NVIDIA open kernel modules"),
    "public-nvml-library-mismatch": (["nvml-library-mismatch"], "Failed to initialize NVML"),
    "public-fabric-manager-version": (["fabric-manager-version"], "don't match with driver version"),
    "public-cuda-802-fabric": (["cuda-system-not-initialized"], "Error 802"),
    "public-mig-device-ordinal": (["mig-device-ordinal"], "INTERNAL ASSERT FAILED"),
    "public-nccl-duplicate-gpu": (["nccl-duplicate-gpu"], "Duplicate GPU detected"),
    "public-systemd-bad-interpreter": (["exec-bad-interpreter"], "Failed at step EXEC spawning"),
}
RECORDED_HEADER = "# Recorded by tests/fixtures/failures/record_failures.py"
QUOTED_HEADER = "# Quoted from public report"
# A source as a header cites it: owner/repo#number.
CITATION = re.compile(r"\b[\w.-]+/[\w.-]+#\d+\b")
BY_NAME = {signature.name: signature for signature in explain.SIGNATURES}


def run_cli(*args, stdin=None):
    return subprocess.run([sys.executable, "-m", "bringup.explain", *args], cwd=ROOT, capture_output=True,
                          text=True, input=stdin, timeout=60)


def reported(output):
    """The ``CODE: title`` lines the CLI printed, in order."""
    return re.findall(r"^([A-Z_]+): (.+) \(line \d+\)$", output, re.M)


def expected_lines(names):
    return [(BY_NAME[name].code, BY_NAME[name].title) for name in names]


def log_path(name):
    return FAILURES / f"{name}.log"


def test_corpus_is_recorded_and_mapped():
    recorded = {path.stem for path in FAILURES.glob("*.log")}
    assert recorded == set(EXPECTED), f"logs without an expectation or missing: {recorded ^ set(EXPECTED)}"
    assert len(recorded) >= 8


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_recorded_log_names_its_causes(name):
    result = run_cli(str(log_path(name).relative_to(ROOT)))
    assert result.returncode == explain.EXIT_FOUND, result.stdout + result.stderr
    assert reported(result.stdout) == expected_lines(EXPECTED[name][0]), result.stdout
    assert "  fix:   " in result.stdout and "  means: " in result.stdout


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_recorded_log_through_stdin(name):
    result = run_cli("-", stdin=log_path(name).read_text())
    assert result.returncode == explain.EXIT_FOUND
    assert result.stdout.startswith("stdin: ")
    assert reported(result.stdout) == expected_lines(EXPECTED[name][0])


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_header_alone_explains_nothing(name):
    header = "".join(line for line in log_path(name).read_text().splitlines(keepends=True) if line.startswith("#"))
    assert header.startswith((RECORDED_HEADER, QUOTED_HEADER)), header[:80]
    result = run_cli("-", stdin=header)
    assert result.returncode == explain.EXIT_UNKNOWN, result.stdout
    assert "no known cause" in result.stdout


@pytest.mark.parametrize("name", sorted(name for name in EXPECTED if name.startswith("public-")))
def test_a_quoted_sample_cites_its_source(name):
    first = log_path(name).read_text().splitlines()[0]
    assert first.startswith(QUOTED_HEADER) and "not recorded here" in first, first
    assert CITATION.search(first), f"{name}: its first line cites no repo#number: {first}"


def test_only_public_samples_are_quoted():
    for path in FAILURES.glob("*.log"):
        quoted = path.read_text().startswith(QUOTED_HEADER)
        assert quoted == path.stem.startswith("public-"), path.name


def partial(text, key, how):
    """A piece of a recorded log that still holds its key line."""
    lines = text.splitlines()
    index = next(number for number, line in enumerate(lines) if key in line)
    if how == "key line only":
        return lines[index] + "\n"
    if how == "from the key line on":
        return "\n".join(lines[index:]) + "\n"
    if how == "cut after the key line":
        # The log ends a few characters into the next line, without a newline.
        return "\n".join(lines[:index + 1]) + "\n" + (lines[index + 1][:7] if index + 1 < len(lines) else "")
    raise ValueError(how)


@pytest.mark.parametrize("how", ["key line only", "from the key line on", "cut after the key line"])
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_partial_log_with_the_key_line(name, how):
    names, key = EXPECTED[name]
    result = run_cli("-", stdin=partial(log_path(name).read_text(), key, how))
    assert result.returncode == explain.EXIT_FOUND, result.stdout
    # The key line alone carries at least its own cause.
    codes = [code for code, _ in reported(result.stdout)]
    assert set(codes) <= {BY_NAME[n].code for n in names} and codes, result.stdout


@pytest.mark.parametrize("signature", explain.SIGNATURES, ids=lambda signature: signature.name)
def test_every_pattern_is_met_in_the_corpus(signature):
    """Each pattern of the table matches a line some tool really printed."""
    lines = [line for path in FAILURES.glob("*.log") for line in path.read_text().splitlines()
             if not line.startswith("#")]
    for pattern in signature.compiled:
        assert any(pattern.search(line) for line in lines), f"{signature.name}: {pattern.pattern} is in no recorded log"


@pytest.mark.parametrize("text", [
    "",
    "ninja: build stopped: subcommand failed.\nRuntimeError: Ninja build failed. Ninja output:\n",
    # A compile error of the source itself: a JIT failure, but none of the known causes.
    "k.cu(3): error: identifier \"undefined_thing\" is undefined\n1 error detected in the compilation of \"k.cu\".\n",
    # The sm75 sentence with another number, and -lcudadevrt: neither is a known cause.
    "FlashInfer requires GPUs with sm80 or higher\n/usr/bin/ld: cannot find -lcudadevrt\n",
    "\x00\xff binary \x1b[31m noise",
], ids=["empty", "other-ninja-failure", "source-error", "near-misses", "binary"])
def test_unknown_log_has_no_known_cause(text):
    result = run_cli("-", stdin=text)
    assert result.returncode == explain.EXIT_UNKNOWN, result.stdout
    assert "no known cause" in result.stdout
    assert "Traceback" not in result.stderr


def test_colour_codes_do_not_hide_a_cause():
    result = run_cli("-", stdin="\x1b[31mRuntimeError: FlashInfer requires GPUs with sm75 or higher\x1b[0m\n")
    assert reported(result.stdout) == expected_lines(["flashinfer-empty-arch-set"])


@pytest.mark.parametrize("name,configured,default", [
    ("flashinfer-norm-no-cublas-headers", ["libcublas-dev-12-9", "CUDA 12.9"], ["libcublas-dev-13-0"]),
    ("flashinfer-0.7.0-trap", ["CUDA_HOME=/usr/local/cuda-12.9", "/etc/sglang/other.env"],
     ["CUDA_HOME=/usr/local/cuda-13.0", "/etc/sglang/sglang.env"]),
])
def test_fix_names_the_configured_toolkit(tmp_path, name, configured, default):
    settings = tmp_path / "settings.yaml"
    settings.write_text('stack_torch_cuda: "12.9"\nservice_env_file: /etc/sglang/other.env\n')
    result = run_cli(str(log_path(name)), "--config", str(settings))
    assert all(part in result.stdout for part in configured), result.stdout
    plain = run_cli(str(log_path(name)))
    assert all(part in plain.stdout for part in default), plain.stdout


def test_the_message_line_is_shown_not_the_quoted_source():
    result = run_cli(str(log_path("flashinfer-0.7.0-trap")))
    assert "  log:   RuntimeError: FlashInfer requires GPUs with sm75 or higher\n" in result.stdout


@pytest.mark.parametrize("args,message", [
    (["/nonexistent/log"], "No such file or directory"),
    (["-", "--config", "/nonexistent/settings.yaml"], "No such file or directory"),
])
def test_unreadable_input_is_an_error_without_traceback(args, message):
    result = run_cli(*args, stdin="")
    assert result.returncode == explain.EXIT_ERROR
    assert message in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize("content", ["stack_torch_cuda: [", "- a list", "stack_torch_cuda: nonsense"])
def test_bad_settings_are_an_error_without_traceback(tmp_path, content):
    settings = tmp_path / "settings.yaml"
    settings.write_text(content)
    result = run_cli("-", "--config", str(settings), stdin="x\n")
    assert result.returncode == explain.EXIT_ERROR, result.stdout
    assert result.stderr.startswith("error: ") and "Traceback" not in result.stderr


def test_signature_codes_are_findings():
    from bringup.findings import CODES

    assert {signature.code for signature in explain.SIGNATURES} <= set(CODES)
    with pytest.raises(ValueError):
        explain.Signature("x", "NOT_A_CODE", "t", ("p",), "m", "f")


def test_a_key_in_the_servers_log_is_never_shown(tmp_path):
    """SGLang logs its ServerArgs (``api_key='...'``); the cause explain names from that
    log, and the lines it quotes, carry no secret (bringup.redact.log_line)."""
    secret = "sk-test-0123456789abcdef"
    log = tmp_path / "journal.log"
    log.write_text(f"server_args=ServerArgs(model_path='Qwen/Qwen3-0.6B', api_key='{secret}', admin_api_key=None)\n"
                   f"sglang serve --api-key {secret} --port 30000\n"
                   f"RuntimeError: No accelerator (CUDA, XPU, HPU) or platform plugin is available "
                   f"(api_key='{secret}')\n")
    result = run_cli(str(log))
    assert result.returncode == 0 and "CUDA_UNAVAILABLE" in result.stdout, result.stdout + result.stderr
    assert secret not in result.stdout + result.stderr
    assert "api_key='<redacted>'" in result.stdout, result.stdout


def test_the_most_telling_line_of_a_cause_is_quoted_wherever_the_log_was_cut():
    """A journal cut at its start (the newest 200 lines of a unit restarting in a loop) may
    begin with a try's last line: systemd's "Failed at step EXEC spawning <script>" is quoted,
    not the "status=203/EXEC" before it."""
    lines = ["sglang.service: Main process exited, code=exited, status=203/EXEC",
             "sglang.service: Failed at step EXEC spawning /opt/sglang/venv/bin/sglang: No such file or directory",
             "sglang.service: Main process exited, code=exited, status=203/EXEC"]
    [match] = explain.explain(lines)
    assert match.signature.code == "SERVICE_ENTRY_POINT_BROKEN" and match.line.startswith(
        "sglang.service: Failed at step EXEC spawning"), match
