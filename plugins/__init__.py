"""Built-in plugins: each subpackage is one pluggy plugin, registered like a third party's."""
