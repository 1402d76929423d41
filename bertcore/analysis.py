"""placeholder"""
from dataclasses import dataclass
@dataclass
class Activations: pass
@dataclass
class Occurrences: pass
