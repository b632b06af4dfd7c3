#!/usr/bin/env python3
"""tests/arch/check_calls.py - no call cycle between the concept folders (docs/ARCHITECTURE.md).

Reads the library's object files (nm): a function or object one folder's code uses and another
folder defines is a call from the first folder to the second. The folders are base/, tracing/,
store/, exporters/, report/, serve/ and each folder of runtime/ (runtime/engine/, runtime/steps/,
...). The calls between folders must form no cycle: a folder never reaches itself again through
others. Function pointers (the run services of runtime/run/run.h, the executor interface, an
exporter's vtable) are not calls: that is how a lower folder reaches a higher one.

Usage: check_calls.py OBJECT_DIR SOURCE_ROOT   (OBJECT_DIR: CMakeFiles/weft_objects.dir)
       check_calls.py --self-test
Prints every cycle with the symbols behind each of its edges; exit status 1 when there is one.
"""
import os
import subprocess
import sys


def folder_of(rel):
    parts = rel.split('/')
    if parts[0] == 'runtime' and len(parts) > 2:
        return 'runtime/' + parts[1]
    return parts[0]


def symbols(objdir, srcroot):
    defined, used, paths = {}, {}, {}
    for d, _, names in os.walk(objdir):
        for name in names:
            if not name.endswith('.c.o'):
                continue
            path = os.path.join(d, name)
            rel = os.path.relpath(path, objdir)[:-2]
            if os.path.exists(os.path.join(srcroot, rel)):
                paths[path] = rel  # else left over from a file that moved or went away
    if not paths:
        return defined, used
    # One nm for every object: "-A" prefixes each line with its file.
    out = subprocess.run(['nm', '-A'] + sorted(paths), capture_output=True, text=True,
                         check=True).stdout
    for line in out.splitlines():
        path, _, rest = line.partition('.c.o:')
        rel = paths.get(path + '.c.o')
        f = rest.split()
        if rel is None:
            continue
        if len(f) == 2 and f[0] == 'U':
            used.setdefault(rel, set()).add(f[1])
        elif len(f) == 3 and f[1] in 'TDBRV':
            defined[f[2]] = rel
    return defined, used


def cycles(graph):
    """Tarjan's strongly connected components with more than one folder."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
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
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def self_test():
    """The cycle finder on graphs whose answer is known (run by ctest beside the real check)."""
    assert cycles({'a': {'b'}, 'b': {'c'}}) == []
    assert cycles({'a': {'b'}, 'b': {'c'}, 'c': {'a'}, 'd': {'a'}}) == [['a', 'b', 'c']]
    assert cycles({'a': {'b'}, 'b': {'a'}, 'c': {'d'}, 'd': {'c'}}) == [['a', 'b'], ['c', 'd']]
    assert folder_of('runtime/steps/agent.c') == 'runtime/steps'
    assert folder_of('exporters/otlp.c') == 'exporters'
    print('check_calls self-test: ok')
    return 0


def main():
    if sys.argv[1:] == ['--self-test']:
        return self_test()
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[-2], file=sys.stderr)
        return 2
    defined, used = symbols(sys.argv[1], sys.argv[2])
    if not defined:
        print(f'check_calls: no object files under {sys.argv[1]}', file=sys.stderr)
        return 2
    graph, why = {}, {}
    for rel, syms in used.items():
        for sym in syms:
            where = defined.get(sym)
            if where is None:
                continue
            a, b = folder_of(rel), folder_of(where)
            if a != b:
                graph.setdefault(a, set()).add(b)
                why.setdefault((a, b), []).append(f'{rel} -> {where}: {sym}')
    found = cycles(graph)
    for comp in found:
        print('call cycle between ' + ', '.join(comp) + ':')
        for a in comp:
            for b in comp:
                if b in graph.get(a, ()):
                    for line in sorted(why[(a, b)])[:5]:
                        print('  ' + line)
    folders = sorted(set(graph) | {b for bs in graph.values() for b in bs})
    if found:
        return 1
    print(f'calls: {len(folders)} folders, {sum(len(v) for v in graph.values())} edges, no cycle')
    return 0


if __name__ == '__main__':
    sys.exit(main())
