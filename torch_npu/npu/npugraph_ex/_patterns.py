"""npugraph_ex's pattern replacements: Inductor's pattern matcher, with a pass
of npugraph_ex's own that its compilations apply to each forward graph
before Inductor lowers it (real npugraph_ex's pattern_pass_manager)."""

import functools

__all__ = ["register_replacement", "apply_replacements"]


@functools.lru_cache(None)
def _pass():
    from torch._inductor.pattern_matcher import PatternMatcherPass
    return PatternMatcherPass(pass_name="npugraph_ex_user_patterns")


def _return_true(match):
    return True


def register_replacement(search_fn, replace_fn, example_inputs, trace_fn=None, extra_check=_return_true,
                         search_fn_pattern=None, scalar_workaround=None, skip_duplicates=False):
    """Registers ``search_fn -> replace_fn`` (traced at ``example_inputs``,
    fake tensors welcome) for every later "npugraph_ex" compilation."""
    from torch._inductor import pattern_matcher

    if not callable(search_fn) or not callable(replace_fn):
        raise TypeError("npugraph_ex.register_replacement: search_fn and replace_fn must be callable")
    return pattern_matcher.register_replacement(
        search_fn, replace_fn, list(example_inputs), trace_fn or pattern_matcher.fwd_only, _pass(),
        extra_check=extra_check, scalar_workaround=scalar_workaround or {}, search_fn_pattern=search_fn_pattern,
        skip_duplicates=skip_duplicates)


def apply_replacements(gm):
    """Applies the registered replacements to ``gm`` in place; the number of matches replaced."""
    if not _pass().patterns:
        return 0
    count = _pass().apply(gm.graph)
    if count:
        gm.graph.lint()
        gm.recompile()
    return count


def inductor_pass():
    """The registered replacements as an Inductor custom post-grad pass
    (``torch._inductor.config.post_grad_custom_pre_pass``), or None when none
    is registered. Its uuid names the registered patterns, so that Inductor's
    FX graph cache tells graphs compiled with different replacements apart."""
    from torch._inductor.custom_graph_pass import CustomGraphPass

    patterns = _pass().patterns
    if not patterns:
        return None

    class _Replacements(CustomGraphPass):
        def __call__(self, graph):
            _pass().apply(graph)

        def uuid(self):
            return ("npugraph_ex_user_patterns", len(_pass().patterns), id(_pass()))

    return _Replacements()
