#!/usr/bin/env bats
# Context parallelism (plan keys cp and cp-pad): ovl-mix --check refuses
# what cannot fit; ovl-construct packs so that every document padded to a
# multiple of 2 x cp still fits seq-len, reports the padding and the
# costliest (DP, CP) rank per step; the outputs carry cu_seqlens_padded
# and max_seqlen; a killed run resumes to the same bytes. cp-balance
# hybrid: every piece on its own CP group, balanced over DP x CP ranks.
# (RankDataset's CP slices against Megatron-LM's: python/tests/test_cp.py.)

load test_helper

setup() {
	cd "$BATS_TEST_TMPDIR" || return 1
	py=$(ovl_python_numpy) || py=python3
	# 200 documents of 1 to 150 bytes (the bytes tokenizer: a token each,
	# and the end token): many shorter than 2 x cp
	"$OVL_BUILDDIR/scripts/ovl-gendocs" --docs 200 --jsonl \
	    --lengths 1,2,3,5,9,20,40,70,150,7,4,33 > d.jsonl
}

plan() {	# plan EXTRA-LINES
	printf 'source a path=d.jsonl throttle=%s\nseq-len 64\nranks 2\nmicro-batches 2\ncheckpoint every=4 dir=ck\noutput format=jsonl path=out/s\n%b' \
		"${THROTTLE:-0}" "$1" > p.plan
	sed -i 's/ throttle=0//' p.plan
}

@test "ovl-mix --check: cp that seq-len cannot hold, cp-pad without cp, document padding with uniform, hybrid's needs" {
	plan 'cp 4\n'
	run -0 "$OVL_MIX" --check p.plan
	[[ "$output" == *$'cp 4\ncp-pad document'* ]]
	# refused: PLAN-LINES, then the message
	local bad=(
	    'cp 3\n' 'p.plan:7: cp 3: seq-len 64 (at=0) is not a multiple of 2 x cp = 6, which cp-pad document pads to'
	    'cp 64\ncp-pad none\n' 'p.plan:7: cp 64: seq-len 64 (at=0) cannot hold 2 x cp = 128 tokens'
	    'cp-pad sequence\n' 'p.plan:7: cp-pad needs cp N'
	    'uniform yes\ncp 2\n' 'p.plan:8: cp 2 with uniform yes: cp-pad document cannot fit'
	    'cp-balance hybrid\n' 'p.plan:7: cp-balance needs cp N'
	    'cp 4\ncp-pad none\ncp-balance hybrid\n' 'p.plan:9: cp-balance hybrid with cp-pad none: a sequence shared by k CP ranks must split into 2 x k chunks'
	    'cp 3\ncp-balance hybrid\n' 'p.plan:8: cp-balance hybrid: cp 3 is not a power of two'
	    'cp 2\ncp-pad sequence\ncp-balance hybrid\nuniform yes\n' 'p.plan:9: cp-balance hybrid with uniform yes'
	) k
	for ((k = 0; k < ${#bad[@]}; k += 2)); do
		plan "${bad[k]}"
		run -2 "$OVL_MIX" --check p.plan
		[[ "$output" == *"${bad[k + 1]}"* ]]
	done
	plan 'uniform yes\ncp 2\ncp-pad sequence\n'
	run -0 "$OVL_MIX" --check p.plan
	plan 'cp 4\ncp-balance hybrid\n'
	run -0 "$OVL_MIX" --check p.plan
	[[ "$output" == *$'cp-balance hybrid'* ]]
	run -2 "$OVL_CONSTRUCT" --uniform p.plan < /dev/null
	[[ "$output" == *"cp 4, cp-balance hybrid: needs"*"no fixed shapes"* ]]
	# a later seq-len stage that cp does not divide
	plan 'cp 4\nseq-len at=1000 100\n'
	sed -i '/^seq-len 64$/d; s/^seq-len at=1000 100$/seq-len 64\nseq-len at=1000 100/' p.plan
	run -2 "$OVL_MIX" --check p.plan
	[[ "$output" == *"cp 4: seq-len 100 (at=1000) is not a multiple of 2 x cp = 8"* ]]
	# ovl-construct refuses an option that undoes the plan's fit
	plan 'cp 4\n'
	run -2 "$OVL_CONSTRUCT" --seq-len 60 p.plan < /dev/null
	[[ "$output" == *"cp 4: seq-len 60 is not a multiple of 2 x cp = 8"* ]]
}

# written_costs POLICY: every step's costliest (DP, CP) rank of the
# sequences written (out/s.jsonl), split as Megatron splits them (cost 1,0:
# the causal attention pairs of the real tokens, 2p+1 at position p),
# equals the stats' cp.written.max_cost
written_costs() {
	"$py" - "$1" <<'PY'
import collections, json, sys
pol, g = sys.argv[1], 8
cost = collections.defaultdict(int)
def pairs(x, y, a):     # positions x..y-1 of a document starting at a
    return (y - a) ** 2 - (x - a) ** 2
for s in map(json.loads, open("out/s.jsonl")):
    cu, cup = s["cu_seqlens"], s["cu_seqlens_padded"]
    for r in range(4):
        key = (s["step"], s["rank"], r)
        if pol == "document":   # chunks r and 7-r of every padded document
            for a, b, pa, pb in zip(cu, cu[1:], cup, cup[1:]):
                c = (pb - pa) // g
                for k in (r, g - 1 - r):
                    cost[key] += pairs(a + min(k * c, b - a), a + min((k + 1) * c, b - a), a)
        else:                   # chunks r and 7-r of the padded sequence
            c = cup[-1] // g
            for k in (r, g - 1 - r):
                for a, b in zip(cu, cu[1:]):
                    x, y = max(a, k * c), min(b, (k + 1) * c)
                    if x < y:
                        cost[key] += pairs(x, y, a)
worst = collections.defaultdict(int)
for (step, _, _), v in cost.items():
    worst[step] = max(worst[step], v)
steps = [json.loads(l) for l in open("ck/stats/construct.1.jsonl")]
assert len(steps) == len(worst) > 10
for st in steps:
    assert st["cp"]["written"]["max_cost"] == worst[st["step"]], (st, worst[st["step"]])
PY
}

@test "cp 4: padded documents fit seq-len, every token once, padding and (DP, CP) costs per step" {
	plan 'cp 4\n'
	run -0 "$OVL_RUN" -q -d run p.plan 3>&-
	"$py" - <<'PY'
import json
docs = [len(json.loads(l)["text"]) + 1 for l in open("d.jsonl")]    # + end token
seqs = [json.loads(l) for l in open("out/s.jsonl")]
total = pad = short = 0
for s in seqs:
    cu, cup = s["cu_seqlens"], s["cu_seqlens_padded"]
    assert len(cu) == len(cup) and cup[0] == 0 and cup[-1] <= 64, s
    lens = [b - a for a, b in zip(cu, cu[1:])]
    plens = [b - a for a, b in zip(cup, cup[1:])]
    assert all(p % 8 == 0 and 0 <= p - n < 8 for n, p in zip(lens, plens)), s
    assert s["max_seqlen"] == max(plens)
    total += sum(lens)
    pad += sum(plens) - sum(lens)
    short += sum(1 for n in lens if n < 8)
assert total == sum(docs) and short > 0, (total, sum(docs), short)
steps = [json.loads(l) for l in open("ck/stats/construct.1.jsonl")]
assert sum(st["cp"]["padding"] for st in steps) == pad > 0
for st in steps:
    cp = st["cp"]
    assert cp["lower_bound"] <= cp["max_cost"] * (1 + 1e-12), st
    assert cp["max_cost"] <= cp["none"]["max_cost"] * (1 + 1e-12), st
PY
	written_costs document
	grep -q '^cp 4$' <("$OVL_CKPT" show ck --at 1)
	# cp-pad sequence: the pack padded at its end, split per sequence
	rm -rf ck out run
	plan 'cp 4\ncp-pad sequence\n'
	run -0 "$OVL_RUN" -q -d run p.plan 3>&-
	written_costs sequence
}

@test "cp plan killed mid-run (ovl-construct, ovl-ckpt of npy; hybrid too): restored, byte-identical" {
	local stage f cp
	for stage in construct ckpt construct:hybrid; do
		cp='cp 4\n'
		[ "${stage#*:}" = hybrid ] && cp='cp 4\ncp-balance hybrid\n'
		stage=${stage%:*}
		rm -rf ck out run ref
		plan "$cp"
		[ "$stage" = construct ] || sed -i 's/format=jsonl/format=npy/' p.plan
		run -0 "$OVL_RUN" -q -d run p.plan 3>&-
		mv out ref
		rm -rf ck run
		THROTTLE=5K plan "$cp"
		[ "$stage" = construct ] || sed -i 's/format=jsonl/format=npy/' p.plan
		"$OVL_RUN" -q -d run --restart 1 p.plan 3>&- 2> err &
		kill_stage_once $! ck "ovl-$stage"
		wait
		[ -n "$victim" ]
		for f in ref/*; do
			cmp "$f" "out/${f#ref/}"
		done
	done
	# the hybrid run's sequences name their CP groups
	grep -q '"local_cp_size":4,"cp_first":0' out/s.jsonl
	grep -q '"local_cp_size":1,"cp_first":3' out/s.jsonl
}

@test "cp plan: resumed at every barrier, the uncut run's bytes; a state of another cp refused" {
	construct_setup 160 32
	printf 'source a path=x\nranks 2\nmicro-batches 2\nseq-len 256\ncp 2\n' > "$T/cp.plan"
	B="$GENARGS --checkpoint-every 2 --ranks 2 --micro-batches 2 --seq-len 256"
	"$GEN" $B > "$T/bar.f"
	"$OVL_CONSTRUCT" "$T/cp.plan" < "$T/bar.f" > "$T/full.f"
	resume_each "$T/full.f" 3 $B -- "$T/cp.plan"
	# a state of cp 2 is not resumed by a run of cp 4
	local d n
	d=$(echo "$T"/cuts.*)
	n=$(head -n 1 "$d/ns")
	sed 's/^cp 2$/cp 4/' "$T/cp.plan" > "$T/cp4.plan"
	run -2 "$OVL_CONSTRUCT" "$T/cp4.plan" --resume "$d/st.$n" < /dev/null
	[[ "$output" == *"the state was written with cp 2, this run has 4"* ]]
	# nor by a run of cp-balance hybrid
	printf 'cp-balance hybrid\n' | cat "$T/cp.plan" - > "$T/hy.plan"
	run -2 "$OVL_CONSTRUCT" "$T/hy.plan" --resume "$d/st.$n" < /dev/null
	[[ "$output" == *"written with cp-balance static, this run has cp-balance hybrid"* ]]
	# nor one without cp by a run with it, nor the other way round
	run -2 "$OVL_CONSTRUCT" --ranks 2 --micro-batches 2 --seq-len 256 \
	    --resume "$d/st.$n" < /dev/null
	[[ "$output" == *"unknown key 'cp'"* ]]
	"$OVL_CONSTRUCT" --ranks 2 --micro-batches 2 --seq-len 256 < "$T/bar.f" > "$T/nocp.f"
	mkdir "$T/nocp"
	python3 "$CHECK" cuts "$T/nocp.f" "$T/nocp" > "$T/nocp.ns"
	run -2 "$OVL_CONSTRUCT" "$T/cp.plan" --resume "$T/nocp/st.$(head -n 1 "$T/nocp.ns")" < /dev/null
	[[ "$output" == *"the state was written without cp, this run has cp 2"* ]]
}

@test "cp-balance hybrid: Megatron's CP sizes on aligned groups, every token once, the (DP, CP) costs as written" {
	plan 'cp 4\ncp-balance hybrid\noutput format=npy path=npy/s\n'
	sed -i '/format=jsonl/d' p.plan
	run -0 "$OVL_RUN" -q -d run p.plan 3>&-
	[ -s npy/s.local_cp_size.npy ] && [ -s npy/s.cp_first.npy ]
	# the checkpoint log holds the construct state's cp-balance
	grep -q '^cp-balance hybrid$' <("$OVL_CKPT" show ck --at 1)
	# the sequences as ovl-ckpt wrote them, against the plan's rule:
	# CP size the next power of two of a document's length over 64 / 4
	# tokens, up to 4; a group of one packs documents into 16 tokens
	"$py" - <<'PY'
import collections, json
import numpy as np
docs = [len(json.loads(l)["text"]) + 1 for l in open("d.jsonl")]
tok = np.load("npy/s.tokens.npy")
seqs = np.load("npy/s.seqs.npy")
cu = np.load("npy/s.cu_seqlens.npy")
cup = np.load("npy/s.cu_seqlens_padded.npy")
lcp = np.load("npy/s.local_cp_size.npy")
first = np.load("npy/s.cp_first.npy")
total, sizes, cost = 0, collections.Counter(), collections.defaultdict(int)
def share(n, k, r):     # causal pairs of a document of n on rank r of k
    p = -(-n // (2 * k)) * 2 * k
    c = p // (2 * k)
    return sum(min(n, (j + 1) * c) ** 2 - min(n, j * c) ** 2 for j in (r, 2 * k - 1 - r))
for i, (step, rank, mb, t0, n, s0, ns) in enumerate(seqs):
    k, f = int(lcp[i]), int(first[i])
    lens = np.diff(cu[s0:s0 + ns + 1])
    plens = np.diff(cup[s0:s0 + ns + 1])
    assert k in (1, 2, 4) and f % k == 0 and f + k <= 4, (k, f)
    assert (plens % (2 * k) == 0).all() and (plens >= lens).all()
    assert plens.sum() <= 16 * k
    if k > 1:   # one document, its CP size Megatron's
        assert ns == 1 and 16 * k // 2 < lens[0] <= 16 * k, (k, lens)
    else:
        assert (lens <= 16).all()
    for n_ in lens:
        c = max(share(int(n_), k, r) for r in range(k))
        for r in range(f, f + k):
            cost[(int(step), int(rank), r)] += c
    sizes[k] += 1
    total += int(lens.sum())
assert total == sum(docs) and sizes[1] and sizes[2] and sizes[4], sizes
worst = collections.defaultdict(int)
for (step, _, _), v in cost.items():
    worst[step] = max(worst[step], v)
steps = [json.loads(l) for l in open("ck/stats/construct.1.jsonl")]
assert len(steps) == len(worst) > 10
for st in steps:
    cp = st["cp"]
    assert cp["max_cost"] == worst[st["step"]], (st, worst[st["step"]])
    assert cp["lower_bound"] <= cp["max_cost"], st
PY
}
