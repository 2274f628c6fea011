#!/usr/bin/env bash
# The device check of the CUDA backend, for a machine with an NVIDIA GPU,
# CUDA's driver and PyTorch, but no Go (the `device` tool's H200). Run from
# the repository root, with the bundle made here by bundle.sh:
#
#	device run: carry=["bin/devicecheck"], timeout_s=420,
#	            command="bash gpu/devicecheck/run.sh"
#
# In about 4 minutes it writes to $OUT (default ./devicecheck-out):
#
#	env.txt         GPU, driver, glibc, the libraries the binaries resolve
#	tests.txt       the CUDA test binary, device required: conformance
#	                (gputest), logits against the CPU backend on generated
#	                models of every type, stories260K greedy reference,
#	                swap tier, argmax and logit mask
#	bench-go.json   decode benchmark of the ~1B model, F16 and Q8_0, at 1,
#	                8, 32 and 64 sequences (bench-go.txt: its log)
#	bench-torch.json the PyTorch bf16 peer on the same shape (and its log)
#	report.json     all of it summarised, with pass/fail per part
#
# Each part has its own time limit (20 + 100 + 180 + 100 s, inside the
# call's 420), so a hang in one still leaves the others' results. Exit status: 0 when the tests passed.
set -u
cd "$(dirname "$0")/../.."
B=${BUNDLE:-bin/devicecheck}
O=${OUT:-./devicecheck-out}
mkdir -p "$O"

if [ ! -x "$B/cuda.test" ]; then
	echo "run.sh: no $B/cuda.test: run gpu/devicecheck/bundle.sh on the build machine and carry $B" >&2
	exit 2
fi

{
	echo "## nvidia-smi"
	nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used,compute_cap,clocks.max.sm,clocks.max.mem --format=csv 2>&1
	echo "## glibc"
	ldd --version 2>&1 | head -1
	echo "## libraries"
	ldconfig -p 2>/dev/null | grep -E 'libcuda\.so|libnvidia-ml\.so' || find / -name 'libcuda.so.1' -not -path '/proc/*' 2>/dev/null | head
	echo "## ldd cuda.test"
	ldd "$B/cuda.test" 2>&1
	lib=$(ldconfig -p 2>/dev/null | awk '/libcuda\.so\.1 /{print $NF; exit}')
	if [ -n "$lib" ]; then
		echo "## driver entry points the binary binds (want 4)"
		nm -D "$lib" 2>/dev/null | grep -cE ' T cu(CtxCreate_v2|MemAlloc_v2|LaunchKernel|ModuleLoadDataEx)$'
	fi
	echo "## zerolayer (cuda tag) starts"
	timeout 20 "$B/zerolayer" --help >"$O/zerolayer-help.tmp" 2>&1
	echo "rc=$?"
	head -5 "$O/zerolayer-help.tmp"
	rm -f "$O/zerolayer-help.tmp"
} >"$O/env.txt" 2>&1

# The tests, device required (a missing device fails instead of skipping).
timeout 100 "$B/cuda.test" -test.v -test.count=1 -test.timeout=90s -cuda.required \
	-cuda.shared="$B/shared" >"$O/tests.txt" 2>&1
tests_rc=$?
echo "rc=$tests_rc" >>"$O/tests.txt"

# The Go decode benchmark.
timeout 180 "$B/cuda.test" -test.v -test.count=1 -test.run '^TestDecodeBench$' -test.timeout=170s \
	-cuda.required -cuda.bench="$O/bench-go.json" >"$O/bench-go.txt" 2>&1
echo "rc=$?" >>"$O/bench-go.txt"

# The PyTorch peer.
PYTHONUNBUFFERED=1 timeout 100 python3 gpu/devicecheck/peer.py --out "$O/bench-torch.json" >"$O/bench-torch.txt" 2>&1
echo "rc=$?" >>"$O/bench-torch.txt"

python3 gpu/devicecheck/report.py "$O" >"$O/report.json" 2>"$O/report.err" || cat "$O/report.err"
rm -f "$O/report.err"
cat "$O/report.json" 2>/dev/null
tail -n 40 "$O/tests.txt"
exit "$tests_rc"
