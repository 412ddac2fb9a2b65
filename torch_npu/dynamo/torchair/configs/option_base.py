"""torchair's option objects: typed values and configs that refuse unknown names."""


class OptionValue:
    """One option: a default and, optionally, the values it may take."""

    def __init__(self, default, optional=None):
        self._default = default
        self._optional = optional
        self._value = default

    def __bool__(self):
        return bool(self._value)

    @property
    def default(self):
        return self._default

    @property
    def optional(self):
        return self._optional

    @property
    def value(self):
        # torchair's convention: booleans read back as "1" / "0", the rest as text.
        if self._value is None:
            return None
        if self._value is True:
            return "1"
        if self._value is False:
            return "0"
        return str(self._value)

    @value.setter
    def value(self, v):
        if isinstance(self._optional, (tuple, list)) and v not in self._optional:
            raise ValueError(f"{v!r} not in optional list {self._optional!r}")
        self._value = v


class NpuBaseConfig:
    """A group of options; assigning an option it does not have raises, naming them all."""

    def __init__(self):
        self._fixed_attrs = [k for k, v in vars(self).items() if isinstance(v, (OptionValue, NpuBaseConfig))]

    def __setattr__(self, key, value):
        if "_fixed_attrs" not in vars(self):
            super().__setattr__(key, value)
            return
        if key not in self._fixed_attrs:
            raise ValueError(f"{type(self).__name__} has no option {key}, all options {self._fixed_attrs}")
        current = getattr(self, key)
        if isinstance(current, OptionValue):
            current.value = value
        else:
            super().__setattr__(key, value)
