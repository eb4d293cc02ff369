"""The storage stack under test, built on a target: an emulated phone stack (loop device, filesystem, FUSE
daemons, the phone models around it) or a directory of the target's own storage.
"""
