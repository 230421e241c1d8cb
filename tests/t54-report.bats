#!/usr/bin/env bats
# ovl-report: the page of a run, rendered by headless Chromium (Debian
# chromium): its DOM after rendering is checked against the run's own
# figures (ovl-ckpt summary, the plan, the per-step statistics), and a
# screenshot is taken. A run with a step and a ramp of the weights, two
# sequence-length stages and one failure (a killed constructor) shows them
# all.

load test_helper

setup_file() {
	export CHROMIUM=$(command -v chromium || command -v chromium-browser || true)
}

setup() {
	cd "$BATS_TEST_TMPDIR" || return 1
	py=$(ovl_python_numpy) || py=python3
	cat > p.plan <<EOF
source web  path=$SAMPLES/web/web-0.jsonl path=$SAMPLES/web/web-1.jsonl format=jsonl partitions=2 on-exhaust=repeat throttle=60K
source book path=$SAMPLES/books/book-0[0-5].txt doc-per=file on-exhaust=repeat throttle=30K
weights web=3 book=1
weights at=40K web=1 book=3
weights at=100K web=1 book=1 ramp=linear
seq-len 256
seq-len at=80K 512
ranks 2
micro-batches 2
checkpoint every=2 dir=ckpt
stop tokens=150K
output format=npy path=out/s
EOF
}

# render FILE PNG: the page as Chromium renders it (its DOM, serialized)
# on stdout, and a picture of it (1000 x 3000) into PNG, from one start
# of Chromium
render() {
	timeout 120 "$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-dev-shm-usage \
		--user-data-dir="$BATS_TEST_TMPDIR/chrome" --window-size=1000,3000 \
		--screenshot="$BATS_TEST_TMPDIR/$2" --dump-dom "file://$BATS_TEST_TMPDIR/$1" 2>/dev/null
}

@test "ovl-report(1) EXAMPLES run against samples/" {
	run_examples ovl-report.1 1
	grep -q '<svg class="chart" id="curriculum"' "$EX/w.1/report.html"
}

@test "report: Chromium renders every chart, and the drawn data are the run's" {
	[ -n "$CHROMIUM" ] || skip "chromium not found: install the Debian package chromium (scripts/bootstrap does)"
	# a run whose constructor is killed once, then finishes
	"$OVL_RUN" -q -d run --restart 1 --status-interval 0.5 --summary sum.json p.plan 3>&- 2> err &
	kill_stage_once $! ckpt ovl-construct
	wait
	run -0 "$OVL_REPORT" -o report.html ckpt
	[[ "$output" == *"wrote report.html"* ]]
	# nothing from elsewhere: no script, no external reference
	! grep -qiE '<script|https?://[^"]*"|src=|@import' report.html || false
	render report.html report.png > dom.html
	[ -s dom.html ]
	"$py" - dom.html sum.json ckpt <<'PY'
import glob, html.parser, json, sys
dom, summ, ck = sys.argv[1], json.load(open(sys.argv[2])), sys.argv[3]

class P(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.svg, self.cur, self.els = {}, None, []
    def handle_starttag(self, tag, a):
        a = dict(a)
        if tag == "svg":
            self.cur = a.get("id")
            self.svg[self.cur] = []
        elif self.cur:
            self.svg[self.cur].append((tag, a))
    def handle_endtag(self, tag):
        if tag == "svg":
            self.cur = None
p = P()
p.feed(open(dom, encoding="utf-8").read())
for c in ("curriculum", "seqlen", "balance", "microbatches", "padding", "rates", "timeline"):
    assert c in p.svg, ("chart missing", c, list(p.svg))
# one padding bar per step, with the step's padding; they sum to the run's
bars = [a for t, a in p.svg["padding"] if t == "rect" and a.get("class") == "step"]
assert len(bars) == summ["steps"], (len(bars), summ["steps"])
assert sum(float(a["data-padding"]) for a in bars) == summ["padding"]
# the per-step statistics, a step computed again counted once
steps = {}
for f in sorted(glob.glob(ck + "/stats/construct.*.jsonl")):
    for l in open(f):
        try:
            o = json.loads(l)
        except ValueError:
            continue
        steps[o["step"]] = o
assert len(steps) == summ["steps"]
# the sequence-length stages: 256 then 512
lines = {a["data-name"]: a for t, a in p.svg["seqlen"] if t == "polyline"}
assert float(lines["seq-len"]["data-last"]) == 512, lines
assert int(lines["seq-len"]["data-points"]) == summ["steps"]
# balance: the costliest rank never under the bound, as drawn
bal = {a["data-name"]: a for t, a in p.svg["balance"] if t == "polyline"}
last = max(steps)
assert abs(float(bal["costliest rank"]["data-last"]) - steps[last]["max_cost"]) <= 1e-6 * steps[last]["max_cost"] + 1e-9
assert int(bal["lower bound"]["data-points"]) == summ["steps"]
# curriculum: the plan as written, a step as a step and the ramp as a
# slope; per interval between checkpoints the realized share, whose mean
# weighted by the interval's tokens is the run's share, beside the planned
# share over the interval (integrated here numerically from the plan)
cur = [a for t, a in p.svg["curriculum"] if t == "polyline"]
def kind(k):
    return {a["data-name"]: [tuple(map(float, xy.split(","))) for xy in a["data-xy"].split()]
            for a in cur if a.get("data-kind") == k}
real, plan, per = kind("realized"), kind("planned"), kind("planned-interval")
assert set(real) == {"web", "book"} and set(plan) == {"web (plan)", "book (plan)"}, (real, plan)
tmax = real["web"][-1][0]
assert tmax >= 100000, tmax
want = {"web": [(0, .75), (40000, .75), (40000, .25), (100000, .5), (tmax, .5)],
        "book": [(0, .25), (40000, .25), (40000, .75), (100000, .5), (tmax, .5)]}
def sched(s, t):
    x = [0, 40000, 40000, 100000, 10 ** 12]
    y = [w for _, w in want[s][:4]] + [.5]
    for i in range(len(x) - 1):
        if x[i] <= t < x[i + 1] or (t == x[i + 1] == 10 ** 12):
            return y[i] + (y[i + 1] - y[i]) * (t - x[i]) / (x[i + 1] - x[i]) if x[i + 1] > x[i] else y[i + 1]
    return .5
for s in ("web", "book"):
    got = plan[s + " (plan)"]
    assert len(got) == 5 and all(abs(a - b) < 1e-9 for p_, q in zip(got, want[s]) for a, b in zip(p_, q)), (s, got)
    r, m = real[s], per[s + " (plan per interval)"]
    assert len(r) == len(m) and len(r) % 2 == 0 and r[0][0] == 0, (s, len(r), len(m))
    tot = 0.0
    for k in range(0, len(r), 2):
        (a, x), (b, y) = r[k], r[k + 1]
        assert x == y and b > a and m[k][0] == a and m[k + 1][0] == b
        tot += x * (b - a)
        n = 4000
        integral = sum(sched(s, a + (b - a) * (i + .5) / n) for i in range(n)) / n
        assert abs(m[k][1] - integral) < 2e-3, (s, a, b, m[k][1], integral)
    share = [x for x in summ["sources"] if x["name"] == s][0]["share_pct"]
    assert abs(tot / tmax * 100 - share) < 1.0, (s, tot / tmax, share)
# an interval per checkpoint read, less those that mixed nothing
assert min(200, summ["checkpoints"]) // 2 <= len(real["web"]) // 2 <= min(200, summ["checkpoints"]), (len(real["web"]), summ["checkpoints"])
# timeline: one start, the constructor restarted alone, one end
ev = [a["data-kind"] for t, a in p.svg["timeline"] if t == "g" and a.get("class") == "event"]
assert ev.count("start") == 1 and ev.count("heal") == 1 and ev.count("end") == 1, ev
assert len(summ["failures"]) == 1 and "construct" in summ["failures"][0], summ
print("ok")
PY
	# the picture itself: a PNG of the whole page
	"$py" - report.png <<'PY'
import struct, sys, zlib
b = open(sys.argv[1], "rb").read()
assert b[:8] == b"\x89PNG\r\n\x1a\n"
w, h = struct.unpack(">II", b[16:24])
assert (w, h) == (1000, 3000), (w, h)
# the image data: not one flat colour (charts were drawn)
i, data = 8, b""
while i < len(b):
    n, t = struct.unpack(">I4s", b[i:i + 8])
    if t == b"IDAT":
        data += b[i + 8:i + 8 + n]
    i += 12 + n
raw = zlib.decompress(data)
assert len(set(raw[:200000])) > 20, "a blank picture"
PY
}

@test "report: errors and a directory without ovl-run's statistics" {
	run -2 "$OVL_REPORT"
	run -2 "$OVL_REPORT" --frobnicate ckpt
	run -1 "$OVL_REPORT" nonexistent
	[[ "$output" == *"'nonexistent': not a checkpoint directory"* ]]
	# the checkpoints alone: the page still has the curriculum
	"$OVL_RUN" -q -d run p.plan 3>&-
	rm -rf ckpt/stats
	run -0 "$OVL_REPORT" -q -o - ckpt
	[[ "$output" == *'id="curriculum"'* ]]
	[[ "$output" != *'id="padding"'* ]]
}
