/**
 * The prefix generations of one namespace as a radix trie over the key's UTF-16 code units (what `startsWith`
 * compares), for the invalidation check on every read (invalidations.ts `covers`). A lookup walks the key once,
 * comparing whole edges (runs of code units no prefix branches or ends within) rather than one code unit or one
 * substring per prefix length, without slicing the key or hashing pieces of it; it stops where no invalidated
 * prefix continues, or as soon as nothing deeper is recent enough to cover the entry.
 */
interface TrieNode {
  /** The code units from the parent to this node (the root's is ''). */
  edge: string;
  /** The generation of the prefix ending here (0: none ends here). */
  gen: number;
  /** The highest generation in this node's subtree, itself included: below it, nothing deeper can cover. */
  max: number;
  /** Children by the first code unit of their edge. */
  next?: Map<number, TrieNode>;
}

export class PrefixTrie {
  private readonly root: TrieNode;

  /** The trie of `prefixes` (prefix → generation). */
  constructor(prefixes: Iterable<readonly [string, number]>) {
    const root: TrieNode = { edge: '', gen: 0, max: 0 };
    for (const [prefix, generation] of prefixes) add(root, prefix, generation);
    compress(root);
    this.root = root;
  }

  /** Whether a prefix of `key` (the key itself included) has a generation at or above `version`. */
  covers(key: string, version: number): boolean {
    let node = this.root;
    let i = 0;
    while (i < key.length) {
      if (node.max < version || !node.next) return false;
      const child = node.next.get(key.charCodeAt(i));
      if (!child || !key.startsWith(child.edge, i)) return false;
      if (child.gen >= version) return true;
      i += child.edge.length;
      node = child;
    }
    return false;
  }
}

/** One code unit per node; {@link compress} merges the chains afterwards. */
function add(root: TrieNode, prefix: string, generation: number): void {
  let node = root;
  node.max = Math.max(node.max, generation);
  for (let i = 0; i < prefix.length; i++) {
    node.next ??= new Map();
    const c = prefix.charCodeAt(i);
    let child = node.next.get(c);
    if (!child) node.next.set(c, (child = { edge: prefix[i]!, gen: 0, max: 0 }));
    child.max = Math.max(child.max, generation);
    node = child;
  }
  node.gen = Math.max(node.gen, generation);
}

/** Folds each node that ends no prefix and has one child into that child's edge. */
function compress(node: TrieNode): void {
  if (!node.next) return;
  for (const child of node.next.values()) {
    while (child.gen === 0 && child.next?.size === 1) {
      const [only] = child.next.values();
      child.edge += only!.edge;
      child.gen = only!.gen;
      child.next = only!.next;
    }
    compress(child);
  }
}
