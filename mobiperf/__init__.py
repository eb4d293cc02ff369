"""mobiperf: where does a phone's storage IO time go, layer by layer, and did a change help?"""

__version__ = "0.1.0"
