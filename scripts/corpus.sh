#!/usr/bin/env bash
# `fusediff bisect` on ONNX's own backend test models (Debian's libonnx-testdata, installed by scripts/setup.sh), each
# with its test_data_set_0 (its inputs and the expected outputs the baseline is checked against), then a table:
# completed, refused steps, exit 2 by reason (an unsupported feature, the engine's own refusal, anything else),
# binding errors and crashes (both must be 0), the expected-output check, and what moved.
#
#   bash scripts/corpus.sh [--build DIR] [--out DIR] [PATH...]
#
# PATH: a model folder (holding model.onnx) or a folder of them; default: the corpus folders pytorch-converted,
# pytorch-operator and simple of /usr/share/libonnx-testdata/data (node: pass it). --out keeps every model's JSON,
# stderr and reproductions there (default: a temporary folder, removed). BISECT_ARGS adds options to every bisect
# (default "--repeats 3 --warmup 1": the timing is not what this checks). Exit 0 when there are no binding errors
# and no crashes, 1 otherwise.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$root/build"
out=""
paths=()
while (($#)); do
  case "$1" in
    --build) build="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    -h|--help) sed -n '2,14p' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) paths+=("$1"); shift ;;
  esac
done
data=/usr/share/libonnx-testdata/data
if ((${#paths[@]} == 0)); then
  [[ -d "$data" ]] || { echo "corpus.sh: $data is missing: run bash scripts/setup.sh (libonnx-testdata)" >&2; exit 2; }
  paths=("$data/pytorch-converted" "$data/pytorch-operator" "$data/simple")
fi
if [[ -z "$out" ]]; then
  out="$(mktemp -d)"
  trap 'rm -rf "$out"' EXIT
fi
mkdir -p "$out"
read -r -a extra <<<"${BISECT_ARGS:---repeats 3 --warmup 1}"

models=()
for p in "${paths[@]}"; do
  if [[ -f "$p/model.onnx" ]]; then
    models+=("$p")
  else
    while IFS= read -r m; do models+=("$(dirname "$m")"); done < <(find "$p" -mindepth 2 -maxdepth 2 -name model.onnx | sort)
  fi
done

: >"$out/runs.tsv"
for m in "${models[@]}"; do
  tag="$(basename "$(dirname "$m")")__$(basename "$m")"
  inputs=()
  [[ -d "$m/test_data_set_0" ]] && inputs=(--inputs "$m/test_data_set_0")
  set +e
  "$build/fusediff" bisect "$m/model.onnx" "${inputs[@]}" --json "$out/$tag.json" --work-dir "$out/$tag.work" \
    "${extra[@]}" >"$out/$tag.out" 2>"$out/$tag.err"
  rc=$?
  set -e
  # Keep only the reproductions (the optimized models of every session are not needed here).
  find "$out/$tag.work" -maxdepth 1 -name '*.onnx' -delete 2>/dev/null || true
  printf '%s\t%s\t%s\n' "$tag" "$rc" "$m" >>"$out/runs.tsv"
done

/usr/bin/python3 - "$out" <<'PY'
import collections, json, os, re, sys

out = sys.argv[1]
rows = [line.rstrip('\n').split('\t') for line in open(os.path.join(out, 'runs.tsv'))]
completed, blacklisted, crashes, binding, other = [], [], [], [], []
unsupported = collections.Counter()
engine = collections.Counter()
refused_models, refused_steps = [], 0
agree, disagree, unchecked = [], [], []
moved = collections.Counter()
kept_moving = collections.Counter()  # one-on steps that move the outputs and are kept (within the bound)
moving_steps, boundaries = 0, 0      # steps that move the outputs; of them those naming a first divergent boundary
binding_re = re.compile(r"names no model (input|output)|binds by position|no tensor for model input|has no name")
for tag, rc, path in rows:
    rc = int(rc)
    # fusediff's own message: its last line (ONNX Runtime may log the same refusal to stderr before it).
    lines = [l for l in open(os.path.join(out, tag + '.err')).read().splitlines() if l.startswith('fusediff:')]
    err = lines[-1] if lines else open(os.path.join(out, tag + '.err')).read().strip()
    if rc in (0, 1):
        completed.append(tag)
        if rc == 1:
            blacklisted.append(tag)
        j = json.load(open(os.path.join(out, tag + '.json')))
        if j['refused_steps']:
            refused_models.append(tag)
            refused_steps += j['refused_steps']
        e = j.get('expected_outputs')
        if e is None:
            unchecked.append(tag)
        elif e['agree']:
            agree.append(tag)
        else:
            bad = [o for o in e['outputs'] if o.get('problem') or o['mismatched']]
            disagree.append((tag, '; '.join(f"{o['output']}: {o.get('problem') or str(o['mismatched']) + ' of ' + str(o['elements']) + ' elements, max |d| ' + format(o['max_abs'], '.3g')}" for o in bad)))
        for name in j['blacklist']['names']:
            moved[name] += 1
        for s in j['steps']:
            if s['kind'] not in ('all_on', 'one_on', 'with_dependency') or not s['delta_acc']['max']:
                continue
            moving_steps += 1
            boundaries += bool(s.get('first_divergent_boundary', {}).get('tensor'))
            if s['kind'] == 'one_on' and s.get('verdict') == 'keep':
                kept_moving[s['transformer']] += 1
    elif rc == 2:
        m = re.search(r"unsupported feature \[([^\]]+)\]", err)
        if binding_re.search(err):
            binding.append((tag, err))
        elif m:
            unsupported[m.group(1)] += 1
        elif 'the engine refuses the model' in err:
            reason = re.sub(r".*ONNX Runtime: ", "", err)
            reason = re.sub(r"'[^']*'|\"[^\"]*\"", "…", reason)[:100]
            engine[reason] += 1
        elif 'is stale for this ONNX Runtime' in err:
            # Level all with every listed name disabled still rewrites the graph: a rewrite no name disables.
            engine['a rewrite no listed name disables (' + re.sub(r".*\(nodes: ([^;]*);.*", r"\1", err) + ')'] += 1
        else:
            other.append((tag, err))
    else:
        crashes.append((tag, rc, err[-300:]))

def table(title, counter):
    lines = [f"| {title} | models |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in counter.most_common()]
    return '\n'.join(lines)

report = [f"# fusediff bisect on {len(rows)} models of ONNX's backend test data", "",
          "| | models |", "|---|---|",
          f"| completed (exit 0 or 1) | {len(completed)} |",
          f"| of which a blacklist (exit 1) | {len(blacklisted)} |",
          f"| of which with refused steps ({refused_steps} steps) | {len(refused_models)} |",
          f"| exit 2: unsupported feature | {sum(unsupported.values())} |",
          f"| exit 2: the engine's own refusal or rewrite | {sum(engine.values())} |",
          f"| exit 2: other | {len(other)} |",
          f"| binding errors | {len(binding)} |",
          f"| crashes (exit >= 3 or a signal) | {len(crashes)} |",
          f"| expected outputs: level disabled agrees | {len(agree)} |",
          f"| expected outputs: disagrees | {len(disagree)} |",
          f"| expected outputs: none to check | {len(unchecked)} |",
          f"| steps that move the outputs / naming their first divergent boundary | {moving_steps} / {boundaries} |", ""]
if unsupported:
    report += [table('unsupported feature', unsupported), '']
if engine:
    report += [table("the engine's own refusal (ONNX Runtime's message at level disabled, quoted names elided) or "
                     "rewrite", engine), '']
if moved:
    report += [table('blacklisted transformer (what moved)', moved), '']
if kept_moving:
    report += [table('kept transformer that moves the outputs (within the rounding-error bound)', kept_moving), '']
for title, items in (('refused steps in', [(t, '') for t in refused_models]), ('disagrees with the expected outputs', disagree),
                     ('exit 2, other', other), ('binding errors', binding), ('crashes', [(t, f'exit {rc}: {e}') for t, rc, e in crashes])):
    if items:
        report += [f"{title}:"] + [f"- {t}{': ' + d if d else ''}" for t, d in items] + ['']
text = '\n'.join(report)
open(os.path.join(out, 'corpus.md'), 'w').write(text + '\n')
json.dump({'models': len(rows), 'completed': len(completed), 'blacklisted': len(blacklisted),
           'models_with_refused_steps': len(refused_models), 'refused_steps': refused_steps,
           'unsupported': dict(unsupported), 'engine_refusals': dict(engine), 'other_exit_2': len(other),
           'binding_errors': len(binding), 'crashes': len(crashes), 'expected_agree': len(agree),
           'expected_disagree': len(disagree), 'expected_unchecked': len(unchecked), 'moved': dict(moved),
           'kept_moving': dict(kept_moving), 'moving_steps': moving_steps, 'boundaries': boundaries},
          open(os.path.join(out, 'corpus.json'), 'w'), indent=1)
print(text)
sys.exit(1 if binding or crashes else 0)
PY
