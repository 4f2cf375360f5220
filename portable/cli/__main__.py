"""python -m portable.cli"""

from portable.cli import main

main()
