"""scheduling-gates: run the gate suite, verify or diff reports, list and explain gates,
sweep seeds."""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Sequence
from pathlib import Path

from catalog import load_catalog
from catalog.milestones import MilestonesError, load_milestones
from catalog.provenance import head_commit
from catalog.rules import load_rules
from gates.runner import RunOptions, SelectionError, command_line, rerun, run_gates
from gates.runner.diff_cli import add_parser as add_diff_parser
from gates.runner.diff_cli import cmd_diff
from gates.runner.inventory import (
    CollectionError,
    collect_inventory,
    default_checks_dir,
    project_root,
)
from gates.runner.merge_cli import add_parser as add_merge_parser
from gates.runner.merge_cli import cmd_merge
from gates.runner.mutate import (
    DEFAULT_TIMEOUT_S,
    coverage,
    load_mutants,
    result_payload,
    run_all,
)
from gates.runner.shard import Shard, ShardError, parse_shard
from gates.runner.sweep import add_parser as add_sweep_parser
from gates.runner.sweep import cmd_sweep
from reports.model import GateReport
from reports.provenance_check import VerifyContext
from reports.signing import (
    SigningError,
    envelope_path,
    generate_key_pair,
    key_id,
    load_private_key,
    load_public_key,
    sign_file,
    signature_problems,
)
from reports.verify import load_report, verify_report
from scheduling.console import add_version, guarded
from scheduling.testing import SystemClock


def _milestone(text: str) -> int:
    value = text.upper().removeprefix("M")
    if not value.isdigit() or int(value) < 1:
        raise argparse.ArgumentTypeError(f"not a milestone: {text!r} (use M11 or 11)")
    return int(value)


def _count(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"not a positive count: {text!r}")
    return int(text)


def _shard(text: str) -> Shard:
    try:
        return parse_shard(text)
    except ShardError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="scheduling-gates", description=__doc__)
    add_version(parser, "scheduling-gates")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = sub.add_parser("run", help="run gate checks and write the report")
    run.add_argument(
        "--gate", action="append", default=[], metavar="ID", help="run only this gate (repeatable)"
    )
    run.add_argument(
        "--milestone",
        action="append",
        default=[],
        type=_milestone,
        metavar="M",
        help="run only this milestone's gates (repeatable)",
    )
    run.add_argument("-n", dest="workers", metavar="N", help="pytest-xdist workers (or auto)")
    run.add_argument(
        "--profile",
        choices=["quick", "deep"],
        default="quick",
        help="quick (CI, default) or deep (more examples, seeds and interleavings)",
    )
    run.add_argument("--seed", type=int, help="replay a run's seed (printed in every report)")
    run.add_argument(
        "--output",
        type=Path,
        default=Path("reports/out"),
        metavar="DIR",
        help="where the four report files go (default reports/out)",
    )
    run.add_argument(
        "--milestone-file",
        "--ledger",
        dest="milestone_file",
        type=Path,
        metavar="FILE",
        help="a deployment's declared milestones (--ledger: its former name)",
    )
    run.add_argument(
        "--sensitivity",
        type=Path,
        metavar="FILE",
        help="the latest `mutate --output` result to link (default reports/out/mutants.json)",
    )
    run.add_argument(
        "--require-ceiling", type=_milestone, metavar="M", help="exit 0 iff the ceiling >= M"
    )
    run.add_argument(
        "--require-complete",
        action="append",
        default=[],
        type=_milestone,
        metavar="M",
        help="exit 0 only if milestone M is complete (repeatable; with --require-ceiling too)",
    )
    run.add_argument(
        "--shard",
        type=_shard,
        metavar="K/N",
        help="run only shard K of N (a deterministic part of the checks) and write a partial"
        " report; join the parts with `scheduling-gates merge`",
    )
    run.add_argument(
        "--sign",
        type=Path,
        metavar="KEYFILE",
        help="sign the report with this Ed25519 private key (PEM; `scheduling-gates keygen`):"
        " writes gate-report.dsse.json beside it",
    )
    run.add_argument("--checks-dir", type=Path, default=None, help=argparse.SUPPRESS)
    run.add_argument("pytest_args", nargs="*", help="extra pytest arguments, after --")

    verify = sub.add_parser("verify", help="recompute a report's ceiling and check its claims")
    verify.add_argument("report", type=Path, help="a gate-report.json")
    verify.add_argument(
        "--milestone-file",
        "--ledger",
        dest="milestone_file",
        type=Path,
        metavar="FILE",
        help="the milestone file the run used (--ledger: its former name)",
    )
    verify.add_argument(
        "--checkout",
        type=Path,
        metavar="DIR",
        help="a checkout of the report's commit: recompute catalog, milestones, check and"
        " product digests",
    )
    verify.add_argument(
        "--allow-dirty",
        action="store_true",
        help="accept a run on a dirty tree, and a checkout with uncommitted changes",
    )
    verify.add_argument(
        "--trust",
        type=Path,
        metavar="PUBKEYFILE",
        help="refuse the report unless its envelope is signed by this Ed25519 public key",
    )
    verify.add_argument(
        "--signature",
        type=Path,
        metavar="FILE",
        help="the report's DSSE envelope (default: gate-report.dsse.json beside it)",
    )
    verify.add_argument(
        "--rerun",
        type=_count,
        metavar="N",
        help="re-run N sampled checks on the --checkout with the report's seed and profile;"
        " refuse when an outcome or an evidence digest does not reproduce",
    )
    verify.add_argument(
        "--seed",
        type=int,
        metavar="S",
        help="the sampling seed of --rerun (default: a fresh one, printed)",
    )

    keygen = sub.add_parser(
        "keygen", help="write an Ed25519 key pair for run --sign / verify --trust"
    )
    keygen.add_argument("private", type=Path, help="the private key file to write (mode 0600)")
    keygen.add_argument("public", type=Path, help="the public key file to write")

    listing = sub.add_parser("list", help="the gate catalog, one gate a line")
    listing.add_argument(
        "--milestone",
        action="append",
        default=[],
        type=_milestone,
        metavar="M",
        help="only this milestone's gates (repeatable)",
    )
    listing.add_argument("--json", action="store_true", help="one JSON array, for scripts")

    explain = sub.add_parser("explain", help="a gate's statement and the checks bound to it")
    explain.add_argument("gate", help="a gate id, e.g. gate.schedule.civil_time")

    sub.add_parser("schema", help="print the JSON Schema of gate-report.json")

    mutate = sub.add_parser(
        "mutate", help="apply each shipped semantic mutant to a copy and report what turns red"
    )
    mutate.add_argument("--mutant", action="append", default=[], metavar="ID", help="repeatable")
    mutate.add_argument("--mutants", type=Path, metavar="FILE", help="another mutants file")
    mutate.add_argument("--output", type=Path, metavar="FILE", help="write the results as JSON")
    mutate.add_argument(
        "--list", action="store_true", help="list the mutants and what each must kill, run none"
    )
    mutate.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT_S,
        metavar="SECONDS",
        help=f"per mutant; checks still running then are TIMEOUT (default {DEFAULT_TIMEOUT_S:g})",
    )
    add_sweep_parser(sub, _milestone)
    add_diff_parser(sub)
    add_merge_parser(sub, _milestone)
    return parser


def _cmd_run(args: argparse.Namespace, argv: Sequence[str]) -> int:
    # Read the key before the run: a bad key fails in a second, not after the suite.
    key = load_private_key(args.sign) if args.sign is not None else None
    options = RunOptions(
        checks_dir=(args.checks_dir or default_checks_dir()).resolve(),
        output=args.output,
        gates=args.gate,
        milestones=args.milestone,
        workers=args.workers,
        profile=args.profile,
        seed=args.seed,
        milestone_file=args.milestone_file,
        sensitivity=args.sensitivity,
        require_ceiling=args.require_ceiling,
        require_complete=args.require_complete,
        pytest_args=args.pytest_args,
        command=command_line(argv),
        shard=args.shard,
    )
    report, code = run_gates(options)
    print()
    if key is not None:
        envelope = sign_file(options.output / "gate-report.json", key)
        print(f"signed by key {key_id(key.public_key())[:16]}: {envelope}")
    if report.run.shard is not None:
        shard = report.run.shard
        print(f"Partial report: shard {shard.index}/{shard.total}, {len(shard.checks)} checks")
        print(
            f"seed {report.run.seed}; merge the parts with: scheduling-gates merge OUT PART.json..."
        )
        return code
    print(f"Verified gate ceiling: {report.ceiling.label}", end="")
    if report.ceiling.held_by:
        print(f" (held by M{report.ceiling.held_by}: {report.ceiling.reason})")
    else:
        print()
    print("  ".join(f"{k} {v}" for k, v in report.summary.items()))
    print(f"seed {report.run.seed}; reports in {options.output}/")
    return code


def _cmd_verify(args: argparse.Namespace) -> int:
    if args.rerun is not None and args.checkout is None:
        print("scheduling-gates: --rerun needs --checkout DIR (where to run)", file=sys.stderr)
        return 2
    trusted = load_public_key(args.trust) if args.trust is not None else None
    report, problems = load_report(args.report)
    said: list[str] = []
    if report is not None:
        catalog = load_catalog()
        declared = load_milestones(args.milestone_file, catalog.milestones())
        context = VerifyContext(
            milestones_path=args.milestone_file,
            shipped_milestones_origin=load_milestones(None, catalog.milestones()).origin,
            checkout=args.checkout,
            allow_dirty=args.allow_dirty,
        )
        problems = verify_report(report, catalog, declared, context)
        if trusted is not None:
            raw = json.loads(args.report.read_text(encoding="utf-8"))
            envelope = args.signature or envelope_path(args.report)
            found = signature_problems(raw, envelope, trusted)
            problems += found
            if not found:
                said.append(f"signed by the trusted key {key_id(trusted)[:16]}")
        if args.rerun is not None:
            if problems:
                print("rerun skipped: the report is refused already", file=sys.stderr)
            else:
                found, summary = _rerun(report, args.checkout, args.rerun, args.seed)
                problems += found
                said.append(summary)
    if problems:
        print(f"REFUSED {args.report}:", file=sys.stderr)
        for problem in problems:
            print(f"  - {problem}", file=sys.stderr)
        return 1
    assert report is not None
    extra = "".join(f"; {s}" for s in said)
    print(f"OK: {args.report} is consistent{extra}; verified gate ceiling {report.ceiling.label}")
    return 0


def _rerun(report: GateReport, checkout: Path, n: int, seed: int | None) -> tuple[list[str], str]:
    """Re-run ``n`` sampled checks; the problems and a one-line summary."""
    problems = rerun.environment_problems(report)
    if problems:
        return problems, ""
    pool = rerun.candidates(report)
    if not pool:
        return ["--rerun: the report records no check to re-run"], ""
    sampling = seed if seed is not None else random.SystemRandom().randrange(2**32)
    chosen = rerun.sample(pool, n, sampling)
    clock = SystemClock()
    started = clock.now()
    print(
        f"re-running {len(chosen)} of {len(pool)} checks on {checkout} (sampling seed"
        f" {sampling}; run seed {report.run.seed}, profile {report.run.profile},"
        f" tzdata {report.run.tzdata})",
        file=sys.stderr,
    )
    where = report.run.provenance.checks_dir if report.run.provenance else None
    results, _ = rerun.rerun_checks(
        chosen,
        checkout,
        report.run.seed,
        report.run.profile,
        where or rerun.DEFAULT_CHECKS_DIR,
    )
    seconds = (clock.now() - started).total_seconds()
    for result in results:
        print(rerun.describe(result), file=sys.stderr)
    problems = [p for p in (r.problem() for r in results) if p is not None]
    same = sum(r.reproduced for r in results)
    summary = (
        f"{same} of {len(results)} re-run checks reproduced in {seconds:.1f} s"
        f" (sampling seed {sampling})"
    )
    print(summary, file=sys.stderr)
    return problems, summary


def _cmd_keygen(args: argparse.Namespace) -> int:
    kid = generate_key_pair(args.private, args.public)
    print(f"wrote {args.private} (private, mode 0600) and {args.public}; key id {kid}")
    return 0


def _cmd_list(args: argparse.Namespace) -> int:
    gates = [g for g in load_catalog() if not args.milestone or g.milestone in args.milestone]
    if args.json:
        rows = [
            {"id": g.id, "milestone": g.milestone, "kind": g.kind.value, "title": g.title}
            | {"facets": list(g.facets)}
            for g in gates
        ]
        print(json.dumps(rows, indent=2))
        return 0
    for gate in gates:
        facets = "" if gate.facets == ("check",) else f" [{', '.join(gate.facets)}]"
        print(f"{gate.id}\tM{gate.milestone}\t{gate.kind.value}\t{gate.title}{facets}")
    return 0


def _cmd_explain(args: argparse.Namespace) -> int:
    catalog = load_catalog()
    if args.gate not in catalog:
        print(f"unknown gate id {args.gate!r}; see `scheduling-gates list`", file=sys.stderr)
        return 2
    gate = catalog.get(args.gate)
    print(f"{gate.id}  (M{gate.milestone}, {gate.kind.value})\n\n{gate.statement}\n")
    try:
        inventory = collect_inventory(default_checks_dir())
    except CollectionError as exc:
        print(f"cannot list bound checks: {exc}", file=sys.stderr)
        return 1
    for facet in gate.facets:
        bound = [c.nodeid for c in inventory if c.gate == gate.id and c.facet == facet]
        print(f"facet {facet}: {len(bound)} check(s)" + ("" if bound else " — MISSING"))
        for nodeid in bound:
            print(f"  {nodeid}")
    print(f"\nrun it: scheduling-gates run --gate {gate.id}")
    return 0


def _cmd_mutate(args: argparse.Namespace) -> int:
    mutants = load_mutants(args.mutants)
    unknown = [m for m in args.mutant if m not in {x.id for x in mutants}]
    if unknown:
        print(f"unknown mutant(s): {', '.join(unknown)}", file=sys.stderr)
        return 2
    chosen = [m for m in mutants if not args.mutant or m.id in args.mutant]
    if args.list:
        for m in chosen:
            print(f"{m.id}  {m.file}  kills {', '.join(m.kills)}")
        return 0
    source = project_root(default_checks_dir())
    clock = SystemClock()
    started = clock.now()
    results = run_all(chosen, source, timeout_s=args.timeout)
    finished = clock.now()
    for r in results:
        red = ", ".join(r.red) or "nothing"
        print(f"{r.verdict:8} {r.id}: red {red}" + (f" ({r.detail})" if r.detail else ""))
    ids = [*load_catalog().ids, *load_rules()]
    uncovered = coverage(mutants, ids)
    killed = sum(r.verdict == "KILLED" for r in results)
    seconds = (finished - started).total_seconds()
    print(f"\n{killed} of {len(results)} mutants killed in {seconds:.0f} s")
    print(f"gates and rules no shipped mutant targets ({len(uncovered)} of {len(ids)}):")
    for gate_id in uncovered:
        print(f"  {gate_id}")
    if args.output:
        payload = result_payload(
            results,
            uncovered,
            selection=args.mutant,
            started_at=started,
            finished_at=finished,
            commit=head_commit(source),
        )
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(payload, indent=2), encoding="utf-8")
    return 0 if killed == len(results) else 1


def main(argv: Sequence[str] | None = None) -> int:
    return guarded(lambda: _main(list(sys.argv[1:] if argv is None else argv)))


def _main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "run":
            return _cmd_run(args, argv)
        if args.command == "verify":
            return _cmd_verify(args)
        if args.command == "list":
            return _cmd_list(args)
        if args.command == "explain":
            return _cmd_explain(args)
        if args.command == "mutate":
            return _cmd_mutate(args)
        if args.command == "sweep":
            return cmd_sweep(args)
        if args.command == "diff":
            return cmd_diff(args)
        if args.command == "merge":
            return cmd_merge(args)
        if args.command == "keygen":
            return _cmd_keygen(args)
        print(json.dumps(GateReport.model_json_schema(), indent=2))
        return 0
    except (SelectionError, MilestonesError, SigningError) as exc:
        print(f"scheduling-gates: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
