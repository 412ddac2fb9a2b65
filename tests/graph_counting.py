"""A context manager counting NPU graph captures and replays (tests of compiled NPU graphs)."""


class CountGraphs:
    """Counts NPU graph captures and replays while active."""

    def __enter__(self):
        import torch_npu.npu.graphs as graphs
        self.graphs, self.captures, self.replays = graphs, 0, 0
        self.begin, self.replay = graphs.NPUGraph.capture_begin, graphs.NPUGraph.replay
        counter = self

        def begin(graph, *args, **kwargs):
            counter.captures += 1
            return counter.begin(graph, *args, **kwargs)

        def replay(graph):
            counter.replays += 1
            return counter.replay(graph)

        graphs.NPUGraph.capture_begin, graphs.NPUGraph.replay = begin, replay
        return self

    def __exit__(self, *exc):
        self.graphs.NPUGraph.capture_begin, self.graphs.NPUGraph.replay = self.begin, self.replay
