# protocol/_recordwalk.c: protocol.record_check._walk_py (judge=None) in C; `invalid` is the
# exception class a malformed record raises.
def walk(
    data: bytes | bytearray | memoryview,
    p: int,
    end: int,
    z: int,
    zend: int,
    tmin: int,
    tmax: int,
    nulls: int,
    final: bool,
    invalid: type[Exception],
    /,
) -> tuple[int, int, int, int, int, int]: ...
