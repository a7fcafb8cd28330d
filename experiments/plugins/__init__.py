"""Ideas from the papers this project started from, each one file on the plug-in hooks (docs/plugins/papers.md, a
page per plug-in beside it): ``jaxrl train --agent experiments.plugins.<file>:<AGENT>``."""
