"""torchair.ge.attr: typed attribute values of GE operators
(``ge.attr.Int(3)``, ``ge.attr.ListInt([1, 2])``, ``ge.attr.Str("x")``).

Each builder, called with a value, gives an attribute of its kind; called on
an attribute of the same kind, it returns it; on one of another kind, it
raises. Attributes compare by kind and value.
"""


class _Attr:
    def __init__(self, kind, check, value=None):
        self.cls = kind
        self._check = check
        self.value = value

    def __call__(self, value):
        if isinstance(value, _Attr):
            if value.cls != self.cls:
                raise AssertionError(f"Type mismatch: ge.attr.{value.cls} given where ge.attr.{self.cls} is expected")
            return value
        if value is None:
            raise AssertionError("Value cannot be None.")
        if not self._check(value):
            raise AssertionError(f"ge.attr.{self.cls} cannot hold {value!r} ({type(value).__name__})")
        return _Attr(self.cls, self._check, value)

    def __eq__(self, other):
        return isinstance(other, _Attr) and self.cls == other.cls and self.value == other.value

    def __hash__(self):
        return hash((self.cls, repr(self.value)))

    def __repr__(self):
        return f"ge.attr.{self.cls}({self.value!r})"


def _number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _list_of(check):
    return lambda v: isinstance(v, (list, tuple)) and all(check(x) for x in v)


def _int(v):
    return isinstance(v, int) and not isinstance(v, bool)


Int = _Attr("Int", _int)
Float = _Attr("Float", _number)
Bool = _Attr("Bool", lambda v: isinstance(v, bool))
DataType = _Attr("DataType", _int)
Str = _Attr("Str", lambda v: isinstance(v, str))
ListInt = _Attr("ListInt", _list_of(_int))
ListFloat = _Attr("ListFloat", _list_of(_number))
ListBool = _Attr("ListBool", _list_of(lambda v: isinstance(v, bool)))
ListDataType = _Attr("ListDataType", _list_of(_int))
ListStr = _Attr("ListStr", _list_of(lambda v: isinstance(v, str)))
ListListInt = _Attr("ListListInt", _list_of(_list_of(_int)))
ListListFloat = _Attr("ListListFloat", _list_of(_list_of(_number)))
