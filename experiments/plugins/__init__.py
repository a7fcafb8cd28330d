"""Ideas from the papers this project started from, each one file on the plug-in hooks (README, "Plug-ins from
papers"): ``jaxrl train --agent experiments.plugins.<file>:<AGENT>``."""
