"""Stand-in torch.optim.optimizer: torch 2's global post-step hook, which the bootstrap registers."""
_hooks = []


def register_optimizer_step_post_hook(hook):
    _hooks.append(hook)


class Optimizer(object):
    def step(self):
        for h in list(_hooks):
            h(self, (), {})


class SGD(Optimizer):
    pass
