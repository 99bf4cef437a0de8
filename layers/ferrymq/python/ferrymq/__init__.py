"""FerryMQ's shared library: settings, errors, the SQS wire protocol, SigV4, worker RPC and AWS adapters."""

from pkgutil import extend_path

# Installed, every part is a subpackage here (ferrymq.frontend, ferrymq.storage, ...). In Lambda the layer holds
# this package and the function's code package holds ferrymq/frontend and ferrymq/metadata under another
# sys.path entry: extending the path joins the two into one package.
__path__ = extend_path(__path__, __name__)

__version__ = "0.1.0"

# Imported here, so that `ferrymq.client` is the function: importing the submodule later cannot rebind it.
from ferrymq.client import client

__all__ = ["__version__", "client"]
