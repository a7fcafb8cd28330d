"""DroQ (Hiraoka et al., ICLR 2022, arXiv 2110.02034): SAC whose two critics have dropout and layer normalisation
after each hidden layer (Linear -> Dropout -> LayerNorm -> ReLU), trained with 20 updates per env step.

    jaxrl train --agent experiments.examples.droq:AGENT --env dmc/CartpoleSwingup --steps 20000

Settings as the official code runs DroQ (TakuyaHiraoka/Dropout-Q-Functions-for-Doubly-Efficient-Reinforcement-
Learning 8afca72, ``OriginalREDQCodebase``: ``-method sac -target_drop_rate 0.01 -layer_norm 1``): 2 critics,
utd_ratio 20, policy_update_delay 20; dropout is on in every critic pass of training (target, critic and actor
losses: the PyTorch modules never leave training mode), which SAC's losses do through ``jaxrl.networks.forward``
with dropout keys folded from each loss's key. Nothing here but settings: SAC's losses carry the dropout.
"""
from types import MappingProxyType

import flax.struct

from agents import sac

static = lambda default: flax.struct.field(pytree_node=False, default=default)  # noqa: E731


@flax.struct.dataclass
class Config(sac.Config):
    critic_dropout: float = static(0.01)
    critic_layer_norm: bool = static(True)
    critic_layer_norm_first: bool = static(True)
    policy_delay: int = static(20)


AGENT = sac.AGENT._replace(name="droq", Config=Config, loop_defaults=MappingProxyType({"updates_per_step": 20}))
