"""YAML settings and inventories, read safely and within bounds.

``yaml.safe_load`` builds no objects but still expands aliases: a "billion laughs"
document of a few lines (nine levels of nine aliases) stands for 9**9 scalars, and
anything that walks it (an error message's repr, pyinfra copying host data) runs out
of memory. ``load`` counts the nodes the document stands for, aliases expanded, and
refuses one beyond ``NODE_BUDGET`` (or with an alias inside itself) before any value
is built.
"""

import yaml

# Far above any inventory or settings file (a thousand hosts of twenty settings is
# about 60 000 nodes), far below what exhausts memory.
NODE_BUDGET = 1_000_000


class TooLarge(yaml.YAMLError):
    """The document expands beyond the budget, or refers to itself."""


def expanded_size(root, budget=NODE_BUDGET):
    """How many nodes the document under ``root`` stands for, each alias counted as
    the whole node it names; raises TooLarge past ``budget`` or on a cycle.

    >>> expanded_size(yaml.compose("a: &x [1, 2]\\nb: [*x, *x]"))
    13
    """
    sizes, on_path = {}, set()

    def size(node):
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in on_path:
            raise TooLarge("an alias refers to the node that holds it (a recursive document): write the values out")
        on_path.add(key)
        children = []
        if isinstance(node, yaml.SequenceNode):
            children = node.value
        elif isinstance(node, yaml.MappingNode):
            children = [part for pair in node.value for part in pair]
        total = 1 + sum(size(child) for child in children)
        on_path.discard(key)
        if total > budget:
            raise TooLarge(f"its aliases expand it to more than {budget} values (an alias bomb): write the values "
                           "out, or alias only small mappings")
        sizes[key] = total
        return total

    return size(root)


class BoundedLoader(yaml.SafeLoader):
    """SafeLoader that checks a document's expanded size before building it."""

    def get_single_node(self):
        node = super().get_single_node()
        if node is not None:
            expanded_size(node)
        return node


def load(stream):
    """One YAML document (``yaml.safe_load``'s types), refused with TooLarge (a YAMLError)
    when its aliases expand beyond NODE_BUDGET nodes.

    >>> load("a: &x [1]\\nb: *x")
    {'a': [1], 'b': [1]}
    >>> load("&a [*a]")
    Traceback (most recent call last):
    ...
    bringup.yamlload.TooLarge: an alias refers to the node that holds it (a recursive document): write the values out
    """
    try:
        return yaml.load(stream, Loader=BoundedLoader)  # noqa: S506 - BoundedLoader is a SafeLoader
    except RecursionError:
        raise TooLarge("it is nested too deeply: flatten it") from None
