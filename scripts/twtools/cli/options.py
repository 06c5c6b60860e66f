"""Options shared by several commands."""


def add_mode_arguments(parser, quick_help, long_help):
    """--quick / --long (default: mode 'default'), the same three modes in every command."""
    g = parser.add_mutually_exclusive_group()
    g.add_argument("--quick", dest="mode", action="store_const", const="quick", help=quick_help)
    g.add_argument("--long", dest="mode", action="store_const", const="long", help=long_help)
    parser.set_defaults(mode="default")
