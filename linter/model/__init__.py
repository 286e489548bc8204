"""What a class, a function and a module's class tree say about K/V, for the rules that reason
beyond one statement (KV104, KV204, KV205).

- ``functions``: one function body read once: parameters, every dotted name read in order,
  every simple assignment, subscript store and return.
- ``classes``: one class read once: the ``self.X`` attributes its methods assign (with the
  values), its methods, its bases, and its ``*Linear`` projections with their output sizes.
- ``hierarchy``: the classes of one module by name, so a subclass sees the projections it
  inherits from a base defined in the same file.

Each model is built on first request for a node and cached by node identity, so the rules of
one batched traversal share it.
"""
