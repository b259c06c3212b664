#!/usr/bin/env python3
"""The scheduler examples, checked and then run for real on this machine.

  schedulers_test.py kubernetes examples/nightly-kubernetes.yaml FUSEDIFF WORK_DIR
  schedulers_test.py slurm examples/nightly-slurm.sh FUSEDIFF WORK_DIR

kubernetes: the manifest parses with PyYAML (Debian python3-yaml) and holds together (an Indexed Job whose
completions equal FUSEDIFF_SHARD_COUNT in both Jobs, the volume, the failure policy); then each pod's script runs
locally with the variables Kubernetes would set, for several nights: the merge waits for every part, the merged
night equals the unsharded run apart from provenance, a regression keeps the baseline, a failed shard stops the
merge.
slurm: `bash -n` passes; `submit` hands sbatch the array and a dependent merge (a stand-in sbatch records the
calls); each array task and the merge run with the variables Slurm would set; a missing task makes the merge
exit 2 naming the shard.
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys

import yaml

SMALL_RUN = "--activation hard_swish --samples 2000"  # small and fast; every path of the flow still runs
SHARD_VARIABLES = ["GTEST_TOTAL_SHARDS", "GTEST_SHARD_INDEX", "TEST_TOTAL_SHARDS", "TEST_SHARD_INDEX",
                   "TEST_SHARD_STATUS_FILE", "JOB_COMPLETION_INDEX", "FUSEDIFF_SHARD_COUNT", "SLURM_ARRAY_TASK_ID",
                   "SLURM_ARRAY_TASK_MIN", "SLURM_ARRAY_TASK_COUNT", "SLURM_ARRAY_TASK_STEP", "SLURM_ARRAY_JOB_ID"]


def fail(message):
    print("FAIL: " + message, file=sys.stderr)
    sys.exit(1)


def check(condition, message):
    if not condition:
        fail(message)


def base_env(bin_dir):
    env = {k: v for k, v in os.environ.items() if k not in SHARD_VARIABLES}
    env["PATH"] = bin_dir + os.pathsep + env.get("PATH", "")
    return env


def run(args, env, timeout=300):
    return subprocess.run(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout)


def without_provenance(path):
    j = json.load(open(path))
    for key in ("created", "command_line"):
        del j[key]
    source = j["shard"].pop("source")
    return j, source


def check_merged_equals(current, whole):
    merged, source = without_provenance(current)
    unsharded, _ = without_provenance(whole)
    check(source == "merge", f"{current}: shard.source is {source!r}, expected 'merge'")
    check(merged["complete"] is True, f"{current}: not complete")
    check(merged == unsharded, f"{current}: the merged parts differ from the unsharded run")


def check_first_night(result, run_status, state, parts, whole):
    """The first night: the verdict of the run, a baseline created, the parts consumed, everything published, and
    the merged results equal to the unsharded run apart from provenance."""
    check(result.returncode == run_status, f"first night exited {result.returncode}: {result.stdout}")
    check(os.path.exists(os.path.join(state, "baseline.json")), "the first night did not create the baseline")
    check(not os.path.exists(parts), "the merged parts were left behind")
    for f in ("signoff.html", "signoff.md", "junit.xml", "run.txt"):
        check(os.path.getsize(os.path.join(state, "publish", f)) > 0, f"{f} not published")
    check_merged_equals(os.path.join(state, "current.json"), whole)


def unsharded_run(fusediff, work, env):
    whole = os.path.join(work, "whole.json")
    r = run([fusediff, "run", "--seed", "1", *SMALL_RUN.split(), "--json", whole], env)
    check(r.returncode in (0, 1), f"unsharded run exited {r.returncode}: {r.stdout}")
    return whole, r.returncode


def env_of(container):
    values = {}
    for item in container["env"]:
        check(isinstance(item["value"], str), f"env {item['name']}: Kubernetes wants a string, got {item['value']!r}")
        values[item["name"]] = item["value"]
    return values


def kubernetes(manifest, fusediff, work, bin_dir):
    documents = list(yaml.safe_load_all(open(manifest)))
    by_kind = {}
    for d in documents:
        check(isinstance(d, dict) and "kind" in d and "apiVersion" in d, f"a document without kind/apiVersion: {d!r}")
        by_kind.setdefault(d["kind"], []).append(d)
    check(len(by_kind.get("PersistentVolumeClaim", [])) == 1, "expected one PersistentVolumeClaim")
    check(len(by_kind.get("Job", [])) == 2, "expected two Jobs (parts, merge)")
    claim = by_kind["PersistentVolumeClaim"][0]
    check("ReadWriteMany" in claim["spec"]["accessModes"], "the shared volume must be ReadWriteMany")
    jobs = {j["metadata"]["name"]: j for j in by_kind["Job"]}
    parts_job, merge_job = jobs["fusediff-nightly-parts"], jobs["fusediff-nightly-merge"]
    check(parts_job["apiVersion"] == "batch/v1" and merge_job["apiVersion"] == "batch/v1", "Jobs are batch/v1")
    spec = parts_job["spec"]
    check(spec["completionMode"] == "Indexed", "the parts Job must be an Indexed Job (JOB_COMPLETION_INDEX)")
    shards = spec["completions"]
    check(isinstance(shards, int) and shards >= 2, f"completions: expected a shard count >= 2, got {shards!r}")
    check(isinstance(spec["parallelism"], int) and 1 <= spec["parallelism"] <= shards, "parallelism")
    scripts = {}
    for name, job in jobs.items():
        pod = job["spec"]["template"]["spec"]
        check(pod["restartPolicy"] == "Never", f"{name}: restartPolicy Never (podFailurePolicy needs it)")
        (container,) = pod["containers"]
        check(container.get("image"), f"{name}: no image")
        env = env_of(container)
        check(env["FUSEDIFF_SHARD_COUNT"] == str(shards),
              f"{name}: FUSEDIFF_SHARD_COUNT {env['FUSEDIFF_SHARD_COUNT']} differs from completions {shards}")
        (mount,) = container["volumeMounts"]
        check(mount["mountPath"] == env["STATE"], f"{name}: the volume is not mounted at STATE")
        (volume,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
        check(volume["persistentVolumeClaim"]["claimName"] == claim["metadata"]["name"], f"{name}: claimName")
        check(container["command"] == ["/bin/sh", "-c"] and len(container["args"]) == 1, f"{name}: command")
        scripts[name] = (container["args"][0], env)
        check(run(["sh", "-n", "-c", container["args"][0]], os.environ).returncode == 0, f"{name}: sh -n")
    _, parts_env = scripts["fusediff-nightly-parts"]
    (parts_container,) = parts_job["spec"]["template"]["spec"]["containers"]
    cpus = parts_container["resources"]["requests"]["cpu"]
    check(parts_env["THREADS"] == parts_env["OMP_NUM_THREADS"] == cpus,
          f"THREADS, OMP_NUM_THREADS and the CPU request differ: {parts_env['THREADS']}, "
          f"{parts_env['OMP_NUM_THREADS']}, {cpus}")
    for rule in spec["podFailurePolicy"]["rules"]:
        check(rule["onExitCodes"]["containerName"] == "fusediff", "podFailurePolicy names another container")
        check(set(rule["onExitCodes"]["values"]) == {2, 3}, "podFailurePolicy: FailJob on exit 2 and 3")

    env = base_env(bin_dir)
    whole, run_status = unsharded_run(fusediff, work, env)
    state = os.path.join(work, "state")

    def pod(name, index=None, run_args=SMALL_RUN, timeout=300):
        script, pod_env = scripts[name]
        e = {**env, **pod_env, "STATE": state, "RUN_ARGS": run_args, "THREADS": "1", "OMP_NUM_THREADS": "1"}
        if index is not None:
            e["JOB_COMPLETION_INDEX"] = str(index)  # set by Kubernetes in each pod of an Indexed Job
        return run(["sh", "-c", script], e, timeout)

    def merge_pod_waits():
        script, pod_env = scripts["fusediff-nightly-merge"]
        e = {**env, **pod_env, "STATE": state}
        p = subprocess.Popen(["sh", "-c", script], env=e, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)
        try:
            p.wait(timeout=2)
            return False
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
            return True

    def night(run_args=SMALL_RUN, check_wait=False):
        for i in range(shards):
            if check_wait and i == shards - 1:
                check(merge_pod_waits(), f"the merge pod did not wait for part {i}")
            r = pod("fusediff-nightly-parts", i, run_args)
            check(r.returncode == 0, f"part {i} exited {r.returncode}: {r.stdout}")
            check(os.path.exists(os.path.join(state, "parts", f"part-{i}.json")), f"part {i} not written")
        return pod("fusediff-nightly-merge")

    check_first_night(night(check_wait=True), run_status, state, os.path.join(state, "parts"), whole)

    second = night()
    check(second.returncode == run_status and "baseline promoted" in second.stdout, f"second night: {second.stdout}")
    check("0 regressions" in second.stdout, f"second night compared nothing: {second.stdout}")

    baseline = open(os.path.join(state, "baseline.json"), "rb").read()
    regression = night(SMALL_RUN + " --max-abs-lsb 0")
    check(regression.returncode == 1, f"a regression night exited {regression.returncode}: {regression.stdout}")
    check(open(os.path.join(state, "baseline.json"), "rb").read() == baseline, "the baseline moved on a regression")

    # A shard with bad input fails its pod (exit 2) and stops the merge at once instead of waiting for its part.
    shutil.rmtree(os.path.join(state, "parts"), ignore_errors=True)
    bad = pod("fusediff-nightly-parts", 0, "--activation no_such_activation")
    check(bad.returncode == 2, f"a bad shard exited {bad.returncode}: {bad.stdout}")
    stopped = pod("fusediff-nightly-merge", timeout=20)
    check(stopped.returncode == 2 and "a shard failed" in stopped.stdout, f"merge after a failed shard: {stopped.stdout}")
    print(f"kubernetes: manifest parses and holds together; {shards} pods x 3 nights merged, compared, promoted")


def slurm(script, fusediff, work, bin_dir):
    r = run(["bash", "-n", script], os.environ)
    check(r.returncode == 0, f"bash -n {script}: {r.stdout}")
    text = open(script).read()
    m = re.search(r"^#SBATCH --array=(\d+)-(\d+)$", text, re.M)
    check(m is not None, "expected an #SBATCH --array=A-B line")
    first_id, last_id = int(m.group(1)), int(m.group(2))
    ids = list(range(first_id, last_id + 1))

    env = base_env(bin_dir)
    whole, run_status = unsharded_run(fusediff, work, env)
    state = os.path.join(work, "state")
    os.makedirs(state)
    env.update(STATE=state, RUN_ARGS=SMALL_RUN)

    # submit: a stand-in sbatch records each call and answers job ids as `sbatch --parsable` does.
    calls = os.path.join(work, "sbatch_calls.txt")
    fake_sbatch = os.path.join(bin_dir, "sbatch")
    with open(fake_sbatch, "w") as f:
        f.write('#!/bin/sh\nprintf "%s\\n" "$*" >> "$SBATCH_CALLS"\n'
                'if [ "$(wc -l < "$SBATCH_CALLS")" -eq 1 ]; then echo 4242; else echo "4243;cluster"; fi\n')
    os.chmod(fake_sbatch, 0o755)
    r = run(["bash", script], dict(env, SBATCH_CALLS=calls))
    check(r.returncode == 0, f"submit exited {r.returncode}: {r.stdout}")
    array_call, merge_call = open(calls).read().splitlines()
    absolute = os.path.abspath(script)
    check(array_call == f"--parsable {absolute} part", f"sbatch for the array: {array_call}")
    check("--dependency=afterany:4242" in merge_call and f"--wrap bash '{absolute}' merge 4242" in merge_call,
          f"sbatch for the merge: {merge_call}")
    check("array job 4242" in r.stdout and "job 4243" in r.stdout, r.stdout)

    def task(task_id, job="4242", run_args=SMALL_RUN):
        e = dict(env, RUN_ARGS=run_args, SLURM_ARRAY_JOB_ID=job, SLURM_ARRAY_TASK_ID=str(task_id), SLURM_ARRAY_TASK_MIN=str(first_id),
                 SLURM_ARRAY_TASK_MAX=str(last_id), SLURM_ARRAY_TASK_COUNT=str(len(ids)), SLURM_ARRAY_TASK_STEP="1",
                 SLURM_CPUS_PER_TASK="1")
        r = run(["bash", script, "part"], e)
        check(r.returncode == 0, f"array task {task_id} exited {r.returncode}: {r.stdout}")
        check(f"from slurm (SLURM_ARRAY_TASK_ID={task_id}" in r.stdout, f"task {task_id}: {r.stdout}")

    for task_id in ids:
        task(task_id)
    merged = run(["bash", script, "merge", "4242"], env)
    check_first_night(merged, run_status, state, os.path.join(state, "parts-4242"), whole)

    # Night 2, one task lost: the merge refuses (exit 2) naming the shard; the baseline stays.
    baseline = open(os.path.join(state, "baseline.json"), "rb").read()
    lost = ids[3]
    for task_id in ids:
        if task_id != lost:
            task(task_id, job="5000")
    refused = run(["bash", script, "merge", "5000"], env)
    missing = f"shard {lost - first_id}/{len(ids)} is missing"
    check(refused.returncode == 2 and missing in refused.stdout, f"merge with a lost task: {refused.stdout}")
    check(open(os.path.join(state, "baseline.json"), "rb").read() == baseline, "the baseline moved")
    task(lost, job="5000")
    again = run(["bash", script, "merge", "5000"], env)
    check(again.returncode == run_status and "0 regressions" in again.stdout, f"merge once complete: {again.stdout}")

    # Night 3, every case out of tolerance: the tasks still succeed (their parts are results), the merge job
    # reports the regression (exit 1) and keeps the baseline.
    baseline = open(os.path.join(state, "baseline.json"), "rb").read()
    for task_id in ids:
        task(task_id, job="6000", run_args=SMALL_RUN + " --max-abs-lsb 0")
    regression = run(["bash", script, "merge", "6000"], env)
    check(regression.returncode == 1 and "REGRESSION" in regression.stdout, f"regression night: {regression.stdout}")
    check(open(os.path.join(state, "baseline.json"), "rb").read() == baseline, "the baseline moved on a regression")
    print(f"slurm: bash -n passes; submit, {len(ids)} array tasks, merge, compare, promote; a lost task is refused; "
          "a regression keeps the baseline")


def main():
    if len(sys.argv) != 5 or sys.argv[1] not in ("kubernetes", "slurm"):
        fail("usage: schedulers_test.py kubernetes|slurm FILE FUSEDIFF WORK_DIR")
    kind, example, fusediff, work = sys.argv[1:]
    shutil.rmtree(work, ignore_errors=True)
    bin_dir = os.path.join(work, "bin")
    os.makedirs(bin_dir)
    os.symlink(os.path.abspath(fusediff), os.path.join(bin_dir, "fusediff"))
    (kubernetes if kind == "kubernetes" else slurm)(example, fusediff, work, bin_dir)


if __name__ == "__main__":
    main()
