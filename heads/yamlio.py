"""The one YAML reader of the project: configs, presets, replications' settings, report specs and claims.

A safe loader with YAML 1.2's plain scalars, so a value means what it looks like:

- numbers: ``010`` is ten (YAML 1.1: eight, octal; octal is written ``0o10``), ``1:30`` is the text "1:30"
  (1.1: ninety, base 60), ``1e-4`` is a float (1.1 wants a dot: ``1.0e-4``); no ``1_000`` digit separators;
- booleans: ``true`` and ``false`` only (1.1 also reads yes/no/on/off, so a label named "no" became False);
- dates and timestamps stay the text as written: no config key is a date, a ``data.revision`` of
  ``2024-01-31`` names a tag, and a ``datetime`` would only fail later, in ``json.dump``, after the work;
- a key given twice in one mapping is refused, naming the key, the file and both lines (PyYAML keeps the last
  and drops the first without a word: a second ``claims:`` lost every claim of the first);
- aliases are bounded: a document whose aliases expand to more than :data:`MAX_NODES` nodes (a "billion
  laughs" of a few hundred bytes) or refer to themselves is refused as soon as it is composed;
- a UTF-8 byte-order mark is dropped and CRLF read as LF, so a file saved by another editor reads the same.

Every refusal is a :class:`YamlError` (an :class:`~heads.io.InputError`, printed by the CLI as one line), or
the error class a caller passes, naming the file and line.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml
from yaml.constructor import ConstructorError
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from heads.io import InputError

# Nodes a document may hold once its aliases are expanded. The largest committed YAML holds about 1,100; nine
# levels of nine aliases (under 420 bytes) expand to 387 million, which whatever walks them (json.dump, a deep
# copy, a schema check) would never finish.
MAX_NODES = 1_000_000


class YamlError(InputError):
    """YAML the project refuses to read (invalid, a duplicated key, an alias bomb); the message names the file."""


class _Refused(ConstructorError):
    """Valid YAML this reader refuses (a duplicated key, an alias bomb): the message says why, not "invalid"."""


_MERGE = "tag:yaml.org,2002:merge"
# YAML 1.2's core schema (https://yaml.org/spec/1.2.2/#1032-tag-resolution), in the order tried
_CORE = [
    ("tag:yaml.org,2002:bool", r"true|True|TRUE|false|False|FALSE", "tTfF"),
    ("tag:yaml.org,2002:int", r"[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+", "-+0123456789"),
    ("tag:yaml.org,2002:float",
     r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)",
     "-+.0123456789"),
]
# 1.1's readings these replace (bool: yes/no/on/off; int: octal, base 60, 1_000; float: 1:30.5; timestamps),
# and its `=` value tag, which the safe loader cannot even construct
_REPLACED = {"tag:yaml.org,2002:bool", "tag:yaml.org,2002:int", "tag:yaml.org,2002:float",
             "tag:yaml.org,2002:timestamp", "tag:yaml.org,2002:value"}


class YamlLoader(yaml.SafeLoader):
    """:class:`yaml.SafeLoader` with YAML 1.2's scalars, refused duplicate keys and bounded aliases."""

    def compose_document(self) -> Node:
        node = super().compose_document()
        _check_size(node)
        return node

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict:
        if isinstance(node, MappingNode):
            _refuse_duplicates(self, node)
        return super().construct_mapping(node, deep=deep)

    def construct_yaml_int(self, node: ScalarNode) -> int:
        value = self.construct_scalar(node)
        try:  # 0o and 0x by their prefix; a leading zero is a decimal digit like any other
            return int(value, 0) if re.fullmatch(r"0[oOxX][0-9a-fA-F]+", value) else int(value, 10)
        except ValueError:
            raise ConstructorError(None, None, f"{value!r} is not an integer", node.start_mark) from None

    def construct_yaml_float(self, node: ScalarNode) -> float:
        value = self.construct_scalar(node)
        special = {".inf": float("inf"), "+.inf": float("inf"), "-.inf": float("-inf"), ".nan": float("nan")}
        if value.lower() in special:
            return special[value.lower()]
        try:
            return float(value)
        except ValueError:
            raise ConstructorError(None, None, f"{value!r} is not a number", node.start_mark) from None

    def construct_yaml_timestamp(self, node: ScalarNode) -> str:
        """An explicit ``!!timestamp`` too stays the text as written (see the module's docstring)."""
        return self.construct_scalar(node)

    def construct_unstorable(self, node: Node) -> None:
        """``!!binary`` (bytes) and ``!!set``: no config holds them, and JSON, where every value ends, cannot."""
        raise _Refused(None, None, f"{node.tag.rsplit(':', 1)[-1]} values are not read here (JSON cannot hold "
                       "them)", node.start_mark)


YamlLoader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in found if tag not in _REPLACED]
    for first, found in yaml.SafeLoader.yaml_implicit_resolvers.items()}
for _tag, _rx, _first in _CORE:
    YamlLoader.add_implicit_resolver(_tag, re.compile(rf"^(?:{_rx})$"), list(_first))
YamlLoader.add_constructor("tag:yaml.org,2002:int", YamlLoader.construct_yaml_int)
YamlLoader.add_constructor("tag:yaml.org,2002:float", YamlLoader.construct_yaml_float)
YamlLoader.add_constructor("tag:yaml.org,2002:timestamp", YamlLoader.construct_yaml_timestamp)
YamlLoader.add_constructor("tag:yaml.org,2002:binary", YamlLoader.construct_unstorable)
YamlLoader.add_constructor("tag:yaml.org,2002:set", YamlLoader.construct_unstorable)


def _line(node: Node) -> int:
    return node.start_mark.line + 1


def _refuse_duplicates(loader: YamlLoader, node: MappingNode) -> None:
    """A key written twice in one mapping (a ``<<`` merge may still be overridden: that is what it is for)."""
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        if key_node.tag == _MERGE:
            continue
        key = loader.construct_object(key_node, deep=True)
        try:
            first = seen.get(key)
        except TypeError:  # an unhashable key: the safe loader's own refusal names it
            continue
        if first is not None:
            raise _Refused(None, None, f"key {key!r} is given twice (first on line {first}); keep one",
                                   key_node.start_mark)
        seen[key] = _line(key_node)


def _check_size(root: Node | None) -> None:
    """The node count of ``root`` with every alias expanded, computed over the shared graph (linear in its
    size); past :data:`MAX_NODES`, or a node that contains itself, a ComposerError at the offending node."""
    if root is None:
        return
    sizes: dict[int, int] = {}
    open_: set[int] = set()

    def size(node: Node) -> int:
        if id(node) in sizes:
            return sizes[id(node)]
        if id(node) in open_:
            raise _Refused(None, None, "an alias refers to a node that contains it", node.start_mark)
        open_.add(id(node))
        if isinstance(node, SequenceNode):
            total = 1 + sum(size(child) for child in node.value)
        elif isinstance(node, MappingNode):
            total = 1 + sum(size(k) + size(v) for k, v in node.value)
        else:
            total = 1
        open_.discard(id(node))
        if total > MAX_NODES:
            raise _Refused(
                None, None, f"its aliases expand to more than {MAX_NODES:,} nodes (an alias bomb?)", node.start_mark)
        sizes[id(node)] = total
        return total

    size(root)


def _message(exc: yaml.YAMLError) -> tuple[int | None, str]:
    """The line and the one-line reason of a PyYAML error."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    return (mark.line + 1 if mark is not None else None), " ".join(problem.split())


def load_yaml(text: str, source: str | Path | None = None, error: type[Exception] = YamlError) -> Any:
    """The YAML document in ``text`` (a file's content or a command-line value); ``source`` names it in an
    ``error`` ("FILE, line N: ..."), by default a :class:`YamlError`."""
    text = text.removeprefix("\ufeff").replace("\r\n", "\n")
    try:
        return yaml.load(text, Loader=YamlLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        line, why = _message(exc)
        where = ", ".join(str(p) for p in (source, line and f"line {line}") if p)
        why = why if isinstance(exc, _Refused) else f"not valid YAML ({why})"
        raise error(f"{where}: {why}" if where else why) from None
    except RecursionError:
        raise error(f"{source or 'YAML'}: nested too deeply to read") from None


def read_text(path: str | Path, error: type[Exception] = YamlError) -> str:
    """A text file's content: UTF-8 (a byte-order mark dropped), CRLF read as LF; other bytes an ``error``."""
    path = Path(path)
    data = path.read_bytes()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise error(f"{path}: not UTF-8 text (byte {exc.start}: {data[exc.start:exc.start + 1]!r})") from None
    return text.replace("\r\n", "\n")


def read_yaml(path: str | Path, error: type[Exception] = YamlError) -> Any:
    """The YAML document in the file ``path``, read by :class:`YamlLoader`; a refusal names the file."""
    return load_yaml(read_text(path, error), path, error)


def read_config(path: str | Path, error: type[Exception] = YamlError) -> Any:
    """A configuration file as Snakemake reads it (JSON first, else YAML), refusing what it would silently drop:
    a duplicated key, in JSON as in YAML."""
    text = read_text(path, error)

    def pairs(items: list[tuple[str, Any]]) -> dict:
        out: dict = {}
        for key, value in items:
            if key in out:
                raise error(f"{path}: key {key!r} is given twice in one object; keep one")
            out[key] = value
        return out

    try:
        return json.loads(text, object_pairs_hook=pairs)
    except json.JSONDecodeError:
        return load_yaml(text, path, error)


def _differs(ours: Any, theirs: Any, key: str = "") -> tuple[str, Any, Any] | None:
    """The first key (dotted) at which two readings of one document differ, with both values; None: the same."""
    if isinstance(ours, dict) and isinstance(theirs, dict) and list(map(str, ours)) == list(map(str, theirs)):
        pairs = [(f"{key}.{k}" if key else str(k), ours[k], theirs[t]) for k, t in zip(ours, theirs, strict=True)]
    elif isinstance(ours, list) and isinstance(theirs, list) and len(ours) == len(theirs):
        pairs = [(f"{key}[{i}]", a, b) for i, (a, b) in enumerate(zip(ours, theirs, strict=True))]
    else:
        same = type(ours) is type(theirs) and (ours == theirs or ours != ours and theirs != theirs)  # NaN
        return None if same else (key, ours, theirs)
    return next((d for d in (_differs(a, b, k) for k, a, b in pairs) if d is not None), None)


def check_configfile(path: str | Path, theirs: Any, reader: str = "Snakemake") -> None:
    """A workflow's configfile read again by this project's reader: a YamlError for a duplicated key (``dag:``
    twice: the first silently dropped) or an alias bomb, or for a value that ``theirs`` (the workflow engine's
    own YAML 1.1 reading of the file) reads otherwise (``010``: eight there, ten here), naming the key."""
    ours = read_config(path)
    differ = _differs(ours, theirs)
    if differ is not None:
        key, a, b = differ
        raise YamlError(f"{path}: {key or 'the document'} reads as {b!r} in {reader} (YAML 1.1) but {a!r} in "
                        "heads (YAML 1.2); write it so both agree (quote a text: '010', '1:30', '2024-01-31')")
