"""`skiff features describe|upgrade|downgrade|disable`, as kafka-features.sh: the supported
and finalized feature levels, and UpdateFeatures through the admin plane."""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from broker.cli.admin.common import EXIT_OK, Client, UsageError, print_json, to_json
from broker.metadata import features as F


def cmd_features_describe(c: Client, args: argparse.Namespace, out: TextIO) -> int:
    resp = c.call(c.features.DescribeFeatures, c.pb.features.DescribeFeaturesRequest())
    if args.output == "json":
        print_json(to_json(resp), out)
        return EXIT_OK
    for f in resp.features:
        def shown(level: int, name: str = f.name) -> str:
            return F.metadata_version_name(level) if name == F.METADATA_VERSION else str(level)
        print(f"Feature: {f.name}\tSupportedMinVersion: {shown(f.supported_min_version)}\t"
              f"SupportedMaxVersion: {shown(f.supported_max_version)}\t"
              f"FinalizedVersionLevel: {shown(f.finalized_version_level)}\t"
              f"Epoch: {resp.finalized_features_epoch}", file=out)
    return EXIT_OK


def _pairs(items: list[str] | None) -> dict[str, int]:
    out: dict[str, int] = {}
    for item in items or ():
        for part in filter(None, item.split(",")):
            name, eq, level = part.partition("=")
            if not eq or not name.strip():
                raise UsageError(f"--feature {part!r}: expected NAME=LEVEL")
            try:
                out[name.strip()] = int(level)
            except ValueError:
                raise UsageError(f"--feature {part!r}: {level!r} is not a level") from None
    return out


def _metadata_level(text: str) -> int:
    try:
        return F.metadata_version_of(text)
    except F.FeatureError as exc:
        raise UsageError(str(exc)) from None


def _send(c: Client, args: argparse.Namespace, levels: dict[str, int], kind: int,
          verb: str, out: TextIO) -> int:
    fp = c.pb.features
    if not levels:
        raise UsageError(f"nothing to {verb}: give --feature NAME=LEVEL"
                         + (" or --metadata VERSION" if verb != "disable" else ""))
    c.call(c.features.UpdateFeatures, fp.UpdateFeaturesRequest(
        validate_only=args.dry_run,
        updates=[fp.FeatureUpdate(feature=n, version_level=v, upgrade_type=kind)
                 for n, v in sorted(levels.items())]))
    for name, level in sorted(levels.items()):
        shown = F.metadata_version_name(level) if name == F.METADATA_VERSION else str(level)
        did = {"upgrade": "upgraded", "downgrade": "downgraded", "disable": "disabled"}[verb]
        print(f"{name} was {'validated to be ' if args.dry_run else ''}{did} to {shown}.",
              file=out)
    return EXIT_OK


def cmd_features_upgrade(c: Client, args: argparse.Namespace, out: TextIO) -> int:
    levels = _pairs(args.feature)
    if args.release_version:
        if args.metadata or levels:
            raise UsageError("--release-version cannot be combined with --metadata or "
                             "--feature")
        try:
            levels = {n: v for n, v in F.bootstrap_levels(args.release_version).items()
                      if v > 0}
        except F.FeatureError as exc:
            raise UsageError(str(exc)) from None
    if args.metadata:
        levels[F.METADATA_VERSION] = _metadata_level(args.metadata)
    return _send(c, args, levels, c.pb.features.UPGRADE_TYPE_UPGRADE, "upgrade", out)


def _downgrade_type(c: Client, args: argparse.Namespace) -> Any:
    fp = c.pb.features
    return fp.UPGRADE_TYPE_UNSAFE_DOWNGRADE if args.unsafe else fp.UPGRADE_TYPE_SAFE_DOWNGRADE


def cmd_features_downgrade(c: Client, args: argparse.Namespace, out: TextIO) -> int:
    levels = _pairs(args.feature)
    if args.metadata:
        levels[F.METADATA_VERSION] = _metadata_level(args.metadata)
    return _send(c, args, levels, _downgrade_type(c, args), "downgrade", out)


def cmd_features_disable(c: Client, args: argparse.Namespace, out: TextIO) -> int:
    levels = {name: 0 for item in args.feature or () for name in item.split(",") if name}
    return _send(c, args, levels, _downgrade_type(c, args), "disable", out)


def add_parsers(sub: Any, verb: Any, common: argparse.ArgumentParser) -> None:
    features = sub.add_parser("features", help="feature levels (as kafka-features.sh)")
    fv = features.add_subparsers(dest="verb", metavar="VERB", required=True)
    verb(fv, "describe", cmd_features_describe, common,
         "supported and finalized feature levels")
    p = verb(fv, "upgrade", cmd_features_upgrade, common, "raise finalized feature levels")
    p.add_argument("--metadata", metavar="VERSION",
                   help="metadata.version as a release (4.0) or level name (4.0-IV3)")
    p.add_argument("--feature", action="append", metavar="NAME=LEVEL")
    p.add_argument("--release-version", metavar="VERSION",
                   help="every feature to the levels of this release")
    p.add_argument("--dry-run", action="store_true", help="validate only")
    p = verb(fv, "downgrade", cmd_features_downgrade, common, "lower finalized feature levels")
    p.add_argument("--metadata", metavar="VERSION")
    p.add_argument("--feature", action="append", metavar="NAME=LEVEL")
    p.add_argument("--unsafe", action="store_true", help="an unsafe (lossy) downgrade")
    p.add_argument("--dry-run", action="store_true", help="validate only")
    p = verb(fv, "disable", cmd_features_disable, common, "disable features (level 0)")
    p.add_argument("--feature", action="append", required=True, metavar="NAME")
    p.add_argument("--unsafe", action="store_true", help="an unsafe (lossy) downgrade")
    p.add_argument("--dry-run", action="store_true", help="validate only")
