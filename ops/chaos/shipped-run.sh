#!/usr/bin/env bash
# A deployment as a user makes it from the README, on the shipped
# ops/nats/nats.conf (only its port, monitor port and store changed):
# `zerolayer secrets init`, nats-server (the version go.mod embeds, built
# from the module), two workers, billing on the local PostgreSQL (a fresh
# schema), the gateway with the key file secrets init wrote. Tenants acme
# and globex each run a 2,000-line `zerolayer batch` through their own NATS
# accounts (with blank lines), globex a 1,000-line OpenAI batch through the
# gateway; once 1,500 jobs are done the worker that did more is kill -9'd.
# It prints the longest gap between completions around the kill, the jobs
# redelivered, the records of each batch and the usage rows per job.
#
#   make build && ops/chaos/shipped-run.sh
#
# Needs ../shared/models/stories260K and PostgreSQL on 127.0.0.1:5432
# (trust auth, user postgres).
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
Z=$ROOT/bin/zerolayer; M=$ROOT/../shared/models/stories260K/stories260K.gguf
D=$(mktemp -d); mkdir -p $D/ops/nats; cd $D
(cd $ROOT && go build -o $D/nats-server github.com/nats-io/nats-server/v2) || exit 1
cp $ROOT/ops/nats/nats.conf ops/nats/
$Z secrets init > keys.txt 2>/dev/null
set -a; . ./.env; set +a
sed 's#/data#'$D'/js#; s/port: 4222/port: 14888/; s/127.0.0.1:8222/127.0.0.1:18888/' ops/nats/nats.conf > n.conf
./nats-server -c n.conf -l $D/nats.log & NATS=$!
sleep 1
N=127.0.0.1:14888
SCHEMA=ur_$(date +%s); psql -q -h 127.0.0.1 -U postgres -c "CREATE SCHEMA $SCHEMA" postgres
DB="postgres://postgres@127.0.0.1:5432/postgres?search_path=$SCHEMA"
$Z migrate up --database-url "$DB" > migrate.log 2>&1
$Z worker --nats-url nats://worker:$ZL_WORKER_PASSWORD@$N --model $M --id w1 --threads 1 > w1.log 2>&1 & W1=$!
$Z worker --nats-url nats://worker:$ZL_WORKER_PASSWORD@$N --model $M --id w2 --threads 1 > w2.log 2>&1 & W2=$!
$Z billing --nats-url nats://billing:$ZL_BILLING_PASSWORD@$N --database-url "$DB" > billing.log 2>&1 & B=$!
$Z gateway --nats-url nats://gateway:$ZL_GATEWAY_PASSWORD@$N --keys secrets/api-keys --listen 127.0.0.1:18088 > gw.log 2>&1 & G=$!
sleep 3
python3 - <<'PY'
import json
for t in ("acme","globex"):
    with open(f"{t}.jsonl","w") as f:
        for i in range(2000):
            if i % 500 == 7: f.write("\n")
            f.write(json.dumps({"custom_id":f"{t}-{i}","request":{"model":"stories260k","max_tokens":96,"messages":[{"role":"user","content":f"Story {i} of {t}"}]}})+"\n")
with open("oa.jsonl","w") as f:
    for i in range(1000):
        f.write(json.dumps({"custom_id":f"oa-{i}","method":"POST","url":"/v1/chat/completions","body":{"model":"stories260k","max_tokens":24,"messages":[{"role":"user","content":f"Doc {i}"}]}})+"\n")
PY
GKEY=$(grep globex keys.txt | cut -f2)
FID=$(curl -s http://127.0.0.1:18088/v1/files -H "Authorization: Bearer $GKEY" -F purpose=batch -F file=@oa.jsonl | python3 -c 'import sys,json;print(json.load(sys.stdin)["id"])')
BID=$(curl -s http://127.0.0.1:18088/v1/batches -H "Authorization: Bearer $GKEY" -H 'Content-Type: application/json' -d "{\"input_file_id\":\"$FID\",\"endpoint\":\"/v1/chat/completions\",\"completion_window\":\"24h\"}" | python3 -c 'import sys,json;print(json.load(sys.stdin)["id"])')
T0=$(date +%s.%N)
$Z batch --nats-url nats://acme:$ZL_TENANT_ACME_PASSWORD@$N --tenant acme --id ur-a --input acme.jsonl --output acme.out --quiet 2> acme.err & A=$!
$Z batch --nats-url nats://globex:$ZL_TENANT_GLOBEX_PASSWORD@$N --tenant globex --id ur-g --input globex.jsonl --output globex.out --quiet 2> globex.err & GB=$!
# kill, once 1,500 jobs are done, the worker that completed the most
while :; do n1=$(grep -c "job done" w1.log); n2=$(grep -c "job done" w2.log); [ $((n1+n2)) -ge 1500 ] && break; sleep 0.2; done
if [ $n1 -ge $n2 ]; then KILL=$W1; KN=w1; else KILL=$W2; KN=w2; fi
KT=$(date +%s.%N); kill -9 $KILL; echo "killed $KN at +$(python3 -c "print(round($KT-$T0,2))") s (w1 $n1, w2 $n2 jobs done)"
wait $A; echo "acme batch exit=$?"; wait $GB; echo "globex batch exit=$?"
for i in $(seq 120); do S=$(curl -s http://127.0.0.1:18088/v1/batches/$BID -H "Authorization: Bearer $GKEY" | python3 -c 'import sys,json;b=json.load(sys.stdin);print(b["status"],b.get("output_file_id") or "")'); case "$S" in completed*) break;; esac; sleep 1; done
OUT=$(echo $S | cut -d' ' -f2); curl -s http://127.0.0.1:18088/v1/files/$OUT/content -H "Authorization: Bearer $GKEY" -o oa.out -D oa.hdr
echo "OpenAI batch: $S; output $(wc -l < oa.out) lines, $(wc -c < oa.out) bytes; Content-Length $(grep -i content-length oa.hdr | tr -d '\r' | cut -d' ' -f2)"
echo "acme: $(grep -c '"completed"' acme.out) completed of $(wc -l < acme.out) records; globex: $(grep -c '"completed"' globex.out) of $(wc -l < globex.out)"
python3 - "$KT" <<'PY'
import re,sys,datetime
kt=float(sys.argv[1]); ts=[]
for f in ("w1.log","w2.log"):
    for l in open(f):
        if "job done" in l:
            m=re.search(r'time=(\S+)',l); a=re.search(r'attempt=(\d+)',l)
            t=datetime.datetime.fromisoformat(m.group(1).replace("Z","+00:00")).timestamp()
            ts.append((t,int(a.group(1))))
ts.sort(); gaps=[(b[0]-a[0],a[0]-kt) for a,b in zip(ts,ts[1:])]
g=max(gaps); print(f"jobs done {len(ts)}; longest completion gap {g[0]:.2f} s (starting {g[1]:+.2f} s from the kill); redelivered {sum(1 for t in ts if t[1]>1)}, last at {max([t[0] for t in ts if t[1]>1] or [kt])-kt:+.2f} s")
PY
sleep 5
psql -At -h 127.0.0.1 -U postgres -c "SELECT count(*), count(DISTINCT (tenant_id, job_id)), count(DISTINCT tenant_id) FROM $SCHEMA.usage" postgres | sed 's/^/usage rows|distinct jobs|tenants: /'
grep -h "Violation" nats.log | head -3
kill $W1 $W2 $B $G $NATS 2>/dev/null; wait 2>/dev/null
PGOPTIONS=--client-min-messages=warning psql -q -h 127.0.0.1 -U postgres -c "DROP SCHEMA $SCHEMA CASCADE" postgres
echo "logs in $D"
