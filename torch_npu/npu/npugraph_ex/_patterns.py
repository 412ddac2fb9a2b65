"""User pattern replacements of the npu compile backends: Inductor's pattern
matcher, with a pass per owner, applied as a post-grad pass before Inductor
lowers each graph:

- "npugraph_ex": ``torch.npu.npugraph_ex.register_replacement``, applied by
  "npugraph_ex" compilations (real npugraph_ex's pattern_pass_manager);
- "torchair": ``torchair.register_replacement``, applied by every
  compilation with torchair's backend (real torchair's pattern_pass_manager).
"""

import contextlib
import functools

__all__ = ["register_replacement", "register_for", "applied"]


@functools.lru_cache(None)
def _pass(owner="npugraph_ex"):
    from torch._inductor.pattern_matcher import PatternMatcherPass
    return PatternMatcherPass(pass_name=f"{owner}_user_patterns")


def _return_true(match):
    return True


def register_for(owner, search_fn, replace_fn, example_inputs, trace_fn=None, extra_check=_return_true,
                 search_fn_pattern=None, scalar_workaround=None, skip_duplicates=False):
    """Registers ``search_fn -> replace_fn`` (traced at ``example_inputs``,
    fake tensors welcome) in ``owner``'s pass."""
    from torch._inductor import pattern_matcher

    if not callable(search_fn) or not callable(replace_fn):
        raise TypeError(f"{owner}.register_replacement: search_fn and replace_fn must be callable")
    return pattern_matcher.register_replacement(
        search_fn, replace_fn, list(example_inputs), trace_fn or pattern_matcher.fwd_only, _pass(owner),
        extra_check=extra_check, scalar_workaround=scalar_workaround or {}, search_fn_pattern=search_fn_pattern,
        skip_duplicates=skip_duplicates)


def register_replacement(search_fn, replace_fn, example_inputs, trace_fn=None, extra_check=_return_true,
                         search_fn_pattern=None, scalar_workaround=None, skip_duplicates=False):
    """``torch.npu.npugraph_ex.register_replacement``: for every later "npugraph_ex" compilation."""
    return register_for("npugraph_ex", search_fn, replace_fn, example_inputs, trace_fn=trace_fn,
                        extra_check=extra_check, search_fn_pattern=search_fn_pattern,
                        scalar_workaround=scalar_workaround, skip_duplicates=skip_duplicates)


def _inductor_pass(owners):
    """``owners``' replacements as one Inductor custom post-grad pass
    (``torch._inductor.config.post_grad_custom_pre_pass``), or None when they
    have none. Its uuid names the registered patterns, so that Inductor's FX
    graph cache tells graphs compiled with different replacements apart."""
    from torch._inductor.custom_graph_pass import CustomGraphPass

    owners = tuple(owner for owner in owners if _pass(owner).patterns)
    if not owners:
        return None

    class _Replacements(CustomGraphPass):
        def __call__(self, graph):
            for owner in owners:
                _pass(owner).apply(graph)

        def uuid(self):
            return ("user_patterns",) + tuple((owner, len(_pass(owner).patterns), id(_pass(owner)))
                                              for owner in owners)

    return _Replacements()


def applied(owners):
    """A context in which Inductor's compilations apply ``owners``' replacements."""
    graph_pass = _inductor_pass(owners)
    if graph_pass is None:
        return contextlib.nullcontext()
    from torch._inductor import config as inductor_config
    return inductor_config.patch(post_grad_custom_pre_pass=graph_pass)
