"""The RLM child process (providers/runtimes/rlm/): run by path, `python -I -B <this directory>`, never imported by
the worker.

Isolated mode puts no PYTHON* variable, no user site and not the current directory on sys.path; running a directory
puts that directory first on it, so `__main__.py` imports its siblings by their plain names (`channel`,
`confinement`) and then takes the directory off sys.path again, before the model's code runs. The child imports
nothing of OpenCompany: only the standard library, `rlm` and these siblings. `confinement.py` imports only the
standard library, so a test can load it by file path and try one guard alone.
"""
