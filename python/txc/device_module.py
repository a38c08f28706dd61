"""torch's device module for 'txc' (torch._register_device_module): what
torch.autocast and the module utilities ask a privateuse1 backend."""
import torch


def is_available():
    return True


def device_count():
    return 1


def current_device():
    return 0


def _is_in_bad_fork():
    return False


def manual_seed_all(seed):
    pass


def get_rng_state(device=None):
    return torch.empty(0, dtype=torch.uint8)


def set_rng_state(new_state, device=None):
    pass


def get_amp_supported_dtype():
    return [torch.float16, torch.bfloat16]
