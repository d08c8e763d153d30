#!/usr/bin/env python3
"""Fail when the modules of a crate refer to each other in a circle.

For every crate under crates/*/src (each crate root: lib.rs, main.rs, bin/*.rs)
this builds the graph of the crate's modules, one node per file (src/a/b.rs and
src/a/b/mod.rs are `a::b`; lib.rs and main.rs are the crate root; inline
`mod x { ... }` blocks belong to their file's node), with an edge A -> B when
the code of A names something in B:

  * `use crate::b::X;`, grouped `use crate::{a::X, b::{self, Y}};`,
    `use super::...` / `use self::...` resolved relative to where they stand,
    and `use child::...` naming a child module;
  * paths written inline: `crate::b::f()`, `super::b::T`, `child::f()`.

A path is resolved to the longest prefix that is a module of the crate; when
the rest names an item that module itself imports (`pub use inner::Thing;` in a
parent, say), the path is followed to the module the item comes from.

Not edges, by design:
  * `mod child;` declarations: a parent owning its children is the tree itself;
  * a reference from a module to one of its ancestors (`use super::Thing` in a
    child whose parent defines Thing): normal layering, not a circle;
  * test code: `tests.rs` files, `mod tests { ... }` blocks, and any item or
    module file under `#[cfg(test)]`;
  * comments, doc comments and string literals.

A circle is a strongly connected component (Tarjan) of more than one module.
Each is printed with its modules and, for every edge inside it, one referencing
line (file:line) and how many references the edge has, so that it can be cut.

Usage:
  scripts/check-module-cycles.py              check every crate; exit 1 on a circle
  scripts/check-module-cycles.py --crate NAME check one crate (directory name under crates/)
  scripts/check-module-cycles.py --root DIR   the workspace to check (default: this repository)
  scripts/check-module-cycles.py --self-test  check the checker on a temporary mini crate
"""

import argparse
import os
import re
import sys
import tempfile

# ---------------------------------------------------------------------------
# Lexing: Rust source to (kind, text, line) tokens, without comments, string,
# character and number literals, and lifetimes.

IDENT_START = re.compile(r"[A-Za-z_]")
IDENT_CHAR = re.compile(r"[A-Za-z0-9_]")


def tokenize(src):
    toks = []
    i, n, line = 0, len(src), 1

    def skip_string(j, ln):
        # src[j] == '"'; returns index after the closing quote and line
        j += 1
        while j < n:
            c = src[j]
            if c == "\\":
                if j + 1 < n and src[j + 1] == "\n":
                    ln += 1
                j += 2
                continue
            if c == "\n":
                ln += 1
            if c == '"':
                return j + 1, ln
            j += 1
        return j, ln

    def skip_raw_string(j, ln):
        # src[j] is '#' or '"' right after an r / br prefix
        hashes = 0
        while j < n and src[j] == "#":
            hashes += 1
            j += 1
        if j >= n or src[j] != '"':
            return None
        j += 1
        close = '"' + "#" * hashes
        end = src.find(close, j)
        if end < 0:
            end = n
        ln += src.count("\n", j, end)
        return end + len(close), ln

    while i < n:
        c = src[i]
        if c == "\n":
            line += 1
            i += 1
        elif c in " \t\r":
            i += 1
        elif src.startswith("//", i):
            end = src.find("\n", i)
            i = n if end < 0 else end
        elif src.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if src.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif src.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    if src[i] == "\n":
                        line += 1
                    i += 1
        elif c == '"':
            i, line = skip_string(i, line)
        elif c == "'":
            if i + 1 < n and src[i + 1] == "\\":
                end = src.find("'", i + 3)  # past the escaped character
                i = n if end < 0 else end + 1
            elif i + 2 < n and src[i + 2] == "'":
                i += 3
            else:  # a lifetime or a label: drop it with its name
                i += 1
                while i < n and IDENT_CHAR.match(src[i]):
                    i += 1
        elif IDENT_START.match(c):
            j = i
            while j < n and IDENT_CHAR.match(src[j]):
                j += 1
            word = src[i:j]
            if word in ("r", "br") and j < n and src[j] in '#"':
                raw = skip_raw_string(j, line)
                if raw is not None:
                    i, line = raw
                    continue
                if word == "r" and src[j] == "#":  # a raw identifier r#name
                    k = j + 1
                    while k < n and IDENT_CHAR.match(src[k]):
                        k += 1
                    toks.append(("ident", src[j + 1 : k], line))
                    i = k
                    continue
            if word == "b" and j < n and src[j] == '"':
                i, line = skip_string(j, line)
                continue
            if word == "b" and j < n and src[j] == "'":
                if j + 1 < n and src[j + 1] == "\\":
                    end = src.find("'", j + 3)
                else:
                    end = src.find("'", j + 1)
                i = n if end < 0 else end + 1
                continue
            toks.append(("ident", word, line))
            i = j
        elif c.isdigit():
            j = i
            while j < n and IDENT_CHAR.match(src[j]):
                j += 1
            i = j
        elif src.startswith("::", i):
            toks.append(("punct", "::", line))
            i += 2
        else:
            toks.append(("punct", c, line))
            i += 1
    return toks


# ---------------------------------------------------------------------------
# Parsing one file: module declarations, imports, definitions, references.

KEYWORD_ROOTS = {"crate", "super", "self"}
ITEM_DEF = {"struct", "enum", "fn", "trait", "type", "const", "static", "union", "mod"}
NOT_A_PATH_START = {"Self", "std", "core", "alloc"}


def is_test_cfg(attr):
    text = "".join(attr)
    return bool(re.match(r"cfg\((test\)|all\(.*\btest\b)", text)) and "not(test" not in text


class FileInfo:
    def __init__(self, path, modpath):
        self.path = path
        self.modpath = modpath  # tuple of segments, () for the crate root
        self.children = []  # names of `mod x;` declared at file scope (not test)
        self.inline_children = {}  # scope tuple -> set of inline module names
        self.imports = {}  # name -> (abs-or-scoped segments, line) at file scope
        self.globs = []  # scoped segments of `use x::*` at file scope
        self.defs = set()  # names defined anywhere in the file's own scopes
        self.refs = []  # (scope, segments, line, line of the `use` or None)
        self.whole_file_test = False


def match_brace(toks, k):
    """toks[k] is '{'; the index of its matching '}' (or the end)."""
    depth = 0
    for m in range(k, len(toks)):
        t = toks[m][1]
        if toks[m][0] != "punct":
            continue
        if t == "{":
            depth += 1
        elif t == "}":
            depth -= 1
            if depth == 0:
                return m
    return len(toks) - 1


def skip_item(toks, k):
    """Index of the last token of the item starting at toks[k]."""
    m = k
    # the item's keyword, after a visibility such as pub(crate)
    if m < len(toks) and toks[m][1] == "pub":
        m += 1
        if m < len(toks) and toks[m][1] == "(":
            while m < len(toks) and toks[m][1] != ")":
                m += 1
            m += 1
    first = toks[m][1] if m < len(toks) else ""
    paren = 0
    while m < len(toks):
        kind, t, _ = toks[m]
        if kind == "punct":
            if t in "([":
                paren += 1
            elif t in ")]":
                paren -= 1
            elif t == ";" and paren <= 0:
                return m
            elif t == "{" and first != "use":
                end = match_brace(toks, m)
                # `const X: T = S { .. };` ends at the `;` that follows
                if end + 1 < len(toks) and toks[end + 1][1] == ";" and first in ("const", "static", "let"):
                    return end + 1
                return end
            elif t == "{":
                m = match_brace(toks, m)
        m += 1
    return len(toks) - 1


def parse_use_tree(toks, k, prefix, out):
    """Parse a use tree at toks[k]; append (segments, alias_or_None, glob, line)
    to out. Returns the index after the tree."""
    segs = list(prefix)
    while k < len(toks):
        kind, t, ln = toks[k]
        if kind == "punct" and t == "{":
            k += 1
            while k < len(toks) and toks[k][1] != "}":
                if toks[k][1] == ",":
                    k += 1
                    continue
                k = parse_use_tree(toks, k, segs, out)
            return k + 1
        if kind == "punct" and t == "*":
            out.append((segs, None, True, ln))
            return k + 1
        if kind == "ident":
            if t == "self" and prefix and len(segs) == len(prefix):
                # `a::{self, ...}`: the prefix itself
                name_segs = list(segs)
            else:
                name_segs = segs + [t]
            k += 1
            if k < len(toks) and toks[k][1] == "::":
                segs = name_segs
                k += 1
                continue
            alias = None
            if k + 1 < len(toks) and toks[k][1] == "as":
                alias = toks[k + 1][1]
                k += 2
            out.append((name_segs, alias, False, ln))
            return k
        # anything else (`::` leading, `;`) ends it
        if kind == "punct" and t == "::":
            k += 1
            continue
        return k
    return k


def parse_file(path, modpath, lines):
    info = FileInfo(path, modpath)
    with open(path, encoding="utf-8", errors="replace") as f:
        src = f.read()
    lines[path] = src.split("\n")
    toks = tokenize(src)
    # scope stack: each frame is ("mod", name) or ("block", None)
    stack = []
    k = 0
    test_next = False
    # an inner #![cfg(test)] before any item makes the file test code
    while k < len(toks):
        kind, t, ln = toks[k]
        # attributes
        if kind == "punct" and t == "#":
            inner = k + 1 < len(toks) and toks[k + 1][1] == "!"
            b = k + (2 if inner else 1)
            if b < len(toks) and toks[b][1] == "[":
                depth, m = 0, b
                while m < len(toks):
                    if toks[m][1] == "[":
                        depth += 1
                    elif toks[m][1] == "]":
                        depth -= 1
                        if depth == 0:
                            break
                    m += 1
                attr = [x[1] for x in toks[b + 1 : m]]
                if is_test_cfg(attr):
                    if inner and not stack:
                        info.whole_file_test = True
                        return info
                    elif inner:
                        # the enclosing inline module is test code: drop its body
                        pass
                    else:
                        test_next = True
                k = m + 1
                continue
        if test_next:
            test_next = False
            k = skip_item(toks, k) + 1
            continue
        scope = tuple(x[1] for x in stack if x[0] == "mod")
        at_module_scope = all(x[0] == "mod" for x in stack)
        if kind == "punct" and t == "{":
            stack.append(("block", None))
            k += 1
            continue
        if kind == "punct" and t == "}":
            if stack:
                stack.pop()
            k += 1
            continue
        if kind == "ident" and t == "mod" and k + 1 < len(toks) and toks[k + 1][0] == "ident":
            name = toks[k + 1][1]
            nxt = toks[k + 2][1] if k + 2 < len(toks) else ";"
            if nxt == ";":
                if name != "tests" and not scope:
                    info.children.append(name)
                k += 3
                continue
            if nxt == "{":
                if name == "tests":
                    k = match_brace(toks, k + 2) + 1
                    continue
                info.inline_children.setdefault(scope, set()).add(name)
                stack.append(("mod", name))
                k += 3
                continue
        if kind == "ident" and t in ITEM_DEF and at_module_scope and k + 1 < len(toks) and toks[k + 1][0] == "ident":
            if not scope:
                info.defs.add(toks[k + 1][1])
        if kind == "ident" and t == "use" and (k == 0 or toks[k - 1][1] != "::"):
            out = []
            end = parse_use_tree(toks, k + 1, [], out)
            for segs, alias, glob, uln in out:
                if not segs:
                    continue
                info.refs.append((scope, segs, uln, ln))
                if at_module_scope and not scope:
                    if glob:
                        info.globs.append(segs)
                    else:
                        name = alias or segs[-1]
                        if name != "_":
                            info.imports[name] = (segs, uln)
            # skip to the end of the use declaration
            m = end
            while m < len(toks) and toks[m][1] != ";":
                m += 1
            k = m + 1
            continue
        # inline paths: an identifier followed by `::`, not itself after `::`
        if (
            kind == "ident"
            and k + 1 < len(toks)
            and toks[k + 1][1] == "::"
            and (k == 0 or toks[k - 1][1] not in ("::", "$"))
            and t not in NOT_A_PATH_START
        ):
            segs = [t]
            m = k + 1
            while m + 1 < len(toks) and toks[m][1] == "::" and toks[m + 1][0] == "ident":
                segs.append(toks[m + 1][1])
                m += 2
            if len(segs) > 1 or t in KEYWORD_ROOTS:
                info.refs.append((scope, segs, ln, None))
            k = m
            continue
        k += 1
    return info


# ---------------------------------------------------------------------------
# A crate target: the module tree from its root, then the graph.


class Target:
    def __init__(self, crate, label, root_file, rel_base):
        self.crate = crate
        self.label = label
        self.root_file = root_file
        self.rel_base = rel_base
        self.files = {}  # modpath -> FileInfo
        self.lines = {}
        self.warnings = []

    def load(self):
        todo = [(self.root_file, ())]
        while todo:
            path, modpath = todo.pop()
            info = parse_file(path, modpath, self.lines)
            if info.whole_file_test:
                continue
            self.files[modpath] = info
            base = os.path.basename(path)
            d = os.path.dirname(path)
            if base in ("lib.rs", "main.rs", "mod.rs") or (modpath == () ):
                child_dir = d
            else:
                child_dir = os.path.join(d, base[:-3])
            for name in info.children:
                cands = [os.path.join(child_dir, name + ".rs"), os.path.join(child_dir, name, "mod.rs")]
                found = [c for c in cands if os.path.isfile(c)]
                if not found:
                    self.warnings.append("%s: `mod %s;` has no file" % (self.rel(path), name))
                    continue
                todo.append((found[0], modpath + (name,)))

    def rel(self, path):
        return os.path.relpath(path, self.rel_base)

    def is_module(self, segs):
        return tuple(segs) in self.files

    def absolute(self, scope_path, segs):
        """Segments of a reference written in scope_path to crate-absolute
        segments, or None when the path is not into this crate."""
        head = segs[0]
        if head == "crate":
            return list(segs[1:])
        cur = list(scope_path)
        rest = list(segs)
        if head in ("self", "super"):
            while rest and rest[0] in ("self", "super"):
                if rest[0] == "super":
                    if not cur:
                        return None
                    cur.pop()
                rest.pop(0)
            return cur + rest
        # a bare first segment: a child module of the scope (file or inline)
        if self.is_module(cur + [head]) or self.is_inline_module(cur + [head]):
            return cur + rest
        # or a name the file imported at its top
        info = self.files.get(tuple(cur))
        if info is not None and head in info.imports and len(segs) > 1:
            target, _ = info.imports[head]
            base = self.absolute(tuple(cur), target)
            if base is not None:
                return base + rest[1:]
        return None

    def is_inline_module(self, segs):
        segs = tuple(segs)
        for n in range(len(segs) - 1, -1, -1):
            info = self.files.get(segs[:n])
            if info is not None:
                names = info.inline_children.get(segs[n:-1], set())
                return segs[-1] in names
        return False

    def resolve(self, abs_segs, depth=0):
        """The file module a crate-absolute path lands in, following imports
        (re-exports) of the module the longest prefix names."""
        n = len(abs_segs)
        while n > 0 and not self.is_module(abs_segs[:n]):
            n -= 1
        mod = tuple(abs_segs[:n])
        rest = abs_segs[n:]
        if not rest or depth > 16:
            return mod
        info = self.files[mod]
        name = rest[0]
        if name in info.defs:
            return mod
        if name in info.imports:
            target, _ = info.imports[name]
            nxt = self.absolute(mod, target)
            if nxt is not None:
                return self.resolve(nxt + rest[1:], depth + 1)
            return mod
        for g in info.globs:
            base = self.absolute(mod, g)
            if base is None:
                continue
            gmod = self.resolve(base, depth + 1)
            ginfo = self.files.get(gmod)
            if ginfo is not None and (name in ginfo.defs or name in ginfo.imports):
                return self.resolve(list(gmod) + rest, depth + 1)
        return mod

    def graph(self):
        edges = {}  # (a, b) -> [(file, line)]
        for modpath, info in self.files.items():
            for scope, segs, ln, use_ln in info.refs:
                scope_path = modpath + scope
                abs_segs = self.absolute(scope_path, segs)
                if abs_segs is None:
                    continue
                target = self.resolve(abs_segs)
                if target == modpath or modpath[: len(target)] == target:
                    continue  # itself or an ancestor
                edges.setdefault((modpath, target), []).append((info.path, ln, use_ln))
        return edges


def name_of(modpath):
    return "::".join(modpath) if modpath else "crate"


def tarjan(nodes, adj):
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]
    sys.setrecursionlimit(max(10000, sys.getrecursionlimit()))

    def strong(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(adj.get(v, ())):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            out.append(sorted(comp))

    for v in sorted(nodes):
        if v not in index:
            strong(v)
    return out


def targets_of(root, crate_dir):
    src = os.path.join(root, "crates", crate_dir, "src")
    found = []
    for r in ("lib.rs", "main.rs"):
        p = os.path.join(src, r)
        if os.path.isfile(p):
            found.append((r[:-3], p))
    bindir = os.path.join(src, "bin")
    if os.path.isdir(bindir):
        for b in sorted(os.listdir(bindir)):
            p = os.path.join(bindir, b)
            if b.endswith(".rs"):
                found.append(("bin " + b[:-3], p))
            elif os.path.isfile(os.path.join(p, "main.rs")):
                found.append(("bin " + b, os.path.join(p, "main.rs")))
    return found


def check(root, only=None):
    """Returns {label: [circle, ...]} where a circle is (modules, edges)."""
    crates_dir = os.path.join(root, "crates")
    names = sorted(d for d in os.listdir(crates_dir) if os.path.isdir(os.path.join(crates_dir, d, "src")))
    if only:
        if only not in names:
            print("check-module-cycles: no crate %r under %s" % (only, crates_dir), file=sys.stderr)
            sys.exit(2)
        names = [only]
    result = {}
    for crate in names:
        tgts = targets_of(root, crate)
        for kind, root_file in tgts:
            label = crate if len(tgts) == 1 else "%s (%s)" % (crate, kind)
            t = Target(crate, label, root_file, root)
            t.load()
            for w in t.warnings:
                print("warning: " + w, file=sys.stderr)
            edges = t.graph()
            adj = {}
            for a, b in edges:
                adj.setdefault(a, set()).add(b)
            circles = []
            for comp in tarjan(t.files.keys(), adj):
                if len(comp) < 2:
                    continue
                members = set(comp)
                inner = sorted(((a, b), refs) for (a, b), refs in edges.items() if a in members and b in members)
                circles.append((comp, inner, t))
            result[label] = circles
    return result


def report(result, out=sys.stdout):
    total = 0
    for label, circles in result.items():
        if not circles:
            print("%s: no module circle" % label, file=out)
            continue
        print("%s: %d module circle(s)" % (label, len(circles)), file=out)
        for i, (comp, inner, t) in enumerate(circles, 1):
            total += 1
            print("  circle %d: %s" % (i, ", ".join(name_of(m) for m in comp)), file=out)
            for (a, b), refs in inner:
                path, ln, use_ln = refs[0]
                text = t.lines[path][ln - 1].strip() if ln - 1 < len(t.lines[path]) else ""
                if use_ln is not None and use_ln != ln:
                    text += "  (in the `use` of line %d)" % use_ln
                more = " (+%d more)" % (len(refs) - 1) if len(refs) > 1 else ""
                print("    %s -> %s%s" % (name_of(a), name_of(b), more), file=out)
                print("      %s:%d: %s" % (t.rel(path), ln, text), file=out)
    return total


# ---------------------------------------------------------------------------
# Self-test: a mini crate with one circle and layering that is not one.

MINI = {
    "lib.rs": """
        //! mini: `crate::b` in a comment is no edge
        pub mod a;
        pub mod b;
        pub mod p;
        pub mod q;
        pub mod r;
        mod s;
        pub use p::Parented;
        #[cfg(test)]
        mod t;
        #[cfg(test)]
        mod tests;
    """,
    # a <-> b: a circle (a use-statement edge, and an inline path edge)
    "a.rs": """
        use crate::{b::Bee, q::Q};
        pub struct Ay;
        pub fn par() -> crate::Parented { crate::Parented }
        pub fn f() -> Bee { Bee }
    """,
    "b.rs": """
        pub struct Bee;
        pub fn g() { let _ = crate::a::Ay; }
        /// see [`crate::q::Q`] (a doc link, no edge)
        pub fn h() { let _s = "crate::q::Q"; }
    """,
    # p and p::c: the child uses its parent (`use super::`), the parent its
    # child: layering, not a circle
    "p.rs": """
        pub mod c;
        pub struct Parented;
        pub fn make() -> c::Child { c::Child }
    """,
    "p/c.rs": """
        use super::Parented;
        use super::super::q;
        pub struct Child;
        pub fn p() -> Parented { Parented }
    """,
    # q uses p only through the root's re-export of p::Parented, and only in
    # test code; r -> s -> r through a re-export is a circle
    "q.rs": """
        pub struct Q;
        #[cfg(test)]
        use crate::Parented;
        #[cfg(test)]
        fn t() -> crate::b::Bee { crate::b::Bee }
        mod tests { use crate::a::Ay; }
    """,
    "r.rs": """
        pub(crate) mod inner {
            pub struct Deep;
            pub fn up() -> super::R { super::R }
        }
        pub struct R;
        pub fn s() -> crate::s::Ess { crate::s::Ess }
        pub use self::inner::Deep;
    """,
    "s.rs": """
        pub struct Ess;
        pub fn deep() -> crate::r::Deep { crate::r::Deep }
        pub fn chars() -> (char, char, &'static str) { ('{', '"', r#"crate::p::c"#) }
    """,
    "t.rs": "use crate::a::Ay; use crate::b::Bee;",
    "tests.rs": "use crate::r::R; use crate::s::Ess;",
}


def self_test():
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "crates", "mini", "src")
        for rel, text in MINI.items():
            p = os.path.join(src, rel)
            os.makedirs(os.path.dirname(p), exist_ok=True)
            with open(p, "w") as f:
                f.write("\n".join(line[8:] if line.startswith("        ") else line for line in text.split("\n")))
        result = check(tmp, "mini")
        circles = result["mini"]
        got = sorted(tuple(name_of(m) for m in comp) for comp, _, _ in circles)
        want = [("a", "b"), ("r", "s")]
        failures = []
        if got != want:
            failures.append("circles: got %r, want %r" % (got, want))
        # the edges inside the a <-> b circle name their lines
        for comp, inner, t in circles:
            names = [name_of(m) for m in comp]
            if names == ["a", "b"]:
                lines = {(name_of(a), name_of(b)): refs[0][1] for (a, b), refs in inner}
                if lines != {("a", "b"): 2, ("b", "a"): 3}:
                    failures.append("a<->b edges: %r" % lines)
        # layering that must not be an edge, and test code
        t = Target("mini", "mini", os.path.join(src, "lib.rs"), tmp)
        t.load()
        edges = t.graph()
        named = {(name_of(a), name_of(b)) for a, b in edges}
        for e in [("p::c", "p"), ("p::c", "crate"), ("q", "p"), ("q", "b"), ("q", "a"), ("b", "q")]:
            if e in named:
                failures.append("unexpected edge %s -> %s" % e)
        for e in [("p", "p::c"), ("p::c", "q"), ("a", "q"), ("a", "p"), ("s", "r")]:
            if e not in named:
                failures.append("missing edge %s -> %s" % e)
        if ("t",) in t.files or ("tests",) in t.files:
            failures.append("test-only module files were loaded")
        buf = _Buf()
        report(result, buf)
        if "a.rs:2: use crate::{b::Bee, q::Q};" not in buf.text:
            failures.append("report lacks the referencing line:\n" + buf.text)
    if failures:
        for f in failures:
            print("self-test FAILED: " + f)
        return 1
    print("self-test passed")
    return 0


class _Buf:
    def __init__(self):
        self.text = ""

    def write(self, s):
        self.text += s


def main():
    ap = argparse.ArgumentParser(description="Fail when modules of a crate refer to each other in a circle.")
    ap.add_argument("--crate", help="check only this crate (its directory name under crates/)")
    ap.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))), help="workspace root")
    ap.add_argument("--self-test", action="store_true", help="test the checker on a temporary mini crate")
    args = ap.parse_args()
    if args.self_test:
        return self_test()
    result = check(args.root, args.crate)
    total = report(result)
    if total:
        print(
            "check-module-cycles: %d circle(s); cut each by moving what one side uses to the module it belongs to "
            "(or a new module both use)" % total
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
